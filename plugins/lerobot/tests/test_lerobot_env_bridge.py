"""The ``lerobot_env`` bridge (issue 36 item 3): a LeRobot env config evaluated through arena
gives the very episodes ``lerobot-eval`` 0.6 gives.

A random ACT checkpoint (deterministic: no VAE sampling at inference) is evaluated on LeRobot's
PushT env config (``{type: pusht, episode_length: 40}``) twice: by LeRobot's own ``eval_policy``
as ``lerobot-eval`` calls it (``bridge_reference.py``, batch size 1, seeds 1000..), and by
``arena run`` (environment ``lerobot_env`` in the lerobot venv's env workers, ``lerobot_remote``
served by ``arena serve lerobot``, seed 1000) with one env and with two env workers. Per
episode the seed, every action, the length, success, ``sum_reward`` (the record's ``return``)
and ``max_reward`` (the ``reward`` metric) must be equal. The server answers one request at a
time (``--max-batch-size 1``): a batched forward pass may round the last bit differently, which
PushT's physics then amplifies; test_serving.py covers batching.

Needs the ``lerobot`` venv (skipped without it, failed under CI).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from arena.rollout.trajectories import read_trajectory
from arena.testing.experiments import run_tiny_experiment
from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent
ENV = {"type": "pusht", "episode_length": 40}
EPISODES = 3
SEED = 1000


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[dict]]:
    python = benchmark_python("lerobot")
    root = tmp_path_factory.mktemp("bridge")
    checkpoint = root / "pretrained_model"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for args in (["build", str(checkpoint)], ["eval", str(checkpoint), json.dumps(ENV), str(EPISODES), "1", str(SEED), str(root / "ref.json")]):
        done = subprocess.run([str(python), str(HERE / "bridge_reference.py"), *args], capture_output=True, text=True, timeout=600, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
    return checkpoint, json.loads((root / "ref.json").read_text())["episodes"]


@pytest.mark.parametrize("num_envs", [1, 2])
def test_lerobot_env_pusht_equals_lerobot_eval(num_envs, reference, tmp_path, monkeypatch):
    checkpoint, expected = reference
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    experiment = {
        "runs": {
            "bridge": {
                "environment": {"type": "lerobot_env", "env": ENV},
                "policy": {"type": "lerobot_remote", "policy_path": str(checkpoint), "device": "cpu", "max_batch_size": 1},
                "environment_builder": {"num_envs": num_envs, "seed": SEED},
                "rollout_limit": {"num_episodes": EPISODES},
                "trajectories": {"enabled": True},
            }
        }
    }
    outcome = run_tiny_experiment(experiment, tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    records = sorted(outcome.episodes("bridge"), key=lambda r: r["episode_index"])
    assert len(records) == EPISODES
    assert any(e["sum_reward"] > 0 for e in expected)  # the comparison of rewards can fail
    for record, ref in zip(records, expected, strict=True):
        where = f"episode {record['episode_index']} (seed {record['seed']})"
        assert record["seed"] == ref["seed"], where
        assert record["steps"] == ref["steps"], where
        assert (record["outcome"] == "success") == ref["success"], where
        assert record["return"] == pytest.approx(ref["sum_reward"], abs=1e-9), where
        assert record["metrics"]["reward"] == pytest.approx(ref["max_reward"], abs=1e-9), where
        trajectory = read_trajectory(outcome.output_dir / "bridge" / record["trajectory"])
        np.testing.assert_array_equal(
            np.asarray(trajectory.action, np.float32), np.asarray(ref["actions"], np.float32), err_msg=where
        )
    first = records[0]
    assert first["protocol"]["benchmark"] == "lerobot_env:pusht"
    assert first["protocol"]["env_config"]["episode_length"] == 40
