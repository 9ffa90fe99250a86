"""``arena run`` with ``lerobot_remote``: arena starts ``arena serve lerobot`` in the ``lerobot``
venv for a random ACT checkpoint, Meta-World episodes complete against it, the records are
written and the server is stopped (issue 25 item 1).

The request adapter is a minimal one of the test's own (Meta-World's 39-dim state as
``observation.environment_state``, its first 4 entries, hand position and gripper, as
``observation.state``), installed as a plugin for the run's subprocesses, so the test does not
depend on the camera adapters of ``arena_lerobot.adapters``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from arena.testing.experiments import run_tiny_experiment, tiny_experiment
from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent

ADAPTER = '''
import numpy as np

from arena.hookspecs import hookimpl
from arena.policies.adapters import EmbodimentAdapter


class MetaWorldStateAdapter(EmbodimentAdapter):
    action_dim = 4

    def extract(self, observation, env_id):
        return observation["policy"]["state"][env_id], observation["task"][env_id]

    def pack_request(self, extracted, instruction):
        state, task = extracted
        state = np.asarray(state, np.float32)
        return {"observation.state": state[:4], "observation.environment_state": state, "task": instruction or str(task)}


@hookimpl
def arena_register_embodiment_adapters(register):
    register("lerobot", "test-metaworld-state", MetaWorldStateAdapter)
'''


def _adapter_plugin(site: Path) -> Path:
    """A plugin distribution (module + entry point) under ``site``, for ``PYTHONPATH``."""
    site.mkdir(parents=True)
    (site / "lerobot_test_adapter.py").write_text(ADAPTER)
    info = site / "lerobot_test_adapter-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lerobot-test-adapter\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[arena]\nlerobot_test_adapter = lerobot_test_adapter\n")
    return site


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    """The module's random checkpoints (``act-metaworld-state``, ``act-ensemble-state``), built by
    one ``serving_reference.py build`` process in the lerobot venv, and the test adapter plugin's
    site directory."""
    root = tmp_path_factory.mktemp("lerobot_remote")
    checkpoints = {kind: root / kind / "pretrained_model" for kind in ("act-metaworld-state", "act-ensemble-state")}
    pairs = [str(x) for kind, checkpoint in checkpoints.items() for x in (kind, checkpoint)]
    done = subprocess.run(
        [str(benchmark_python("lerobot")), str(HERE / "serving_reference.py"), "build", *pairs],
        capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return checkpoints, _adapter_plugin(root / "site")


def _checkpoint_and_adapter(kind: str, built, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The random checkpoint ``kind`` of ``built``, with the test adapter plugin on
    ``PYTHONPATH`` and one torch thread, for an ``arena run``."""
    checkpoints, site = built
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return checkpoints[kind]


def test_arena_run_serves_a_random_act_checkpoint_on_metaworld(built, tmp_path, monkeypatch):
    checkpoint = _checkpoint_and_adapter("act-metaworld-state", built, monkeypatch)

    policy = {"type": "lerobot_remote", "policy_path": str(checkpoint), "embodiment": "test-metaworld-state", "device": "cpu"}
    outcome = run_tiny_experiment(
        tiny_experiment(policy, episodes=3, num_envs=2, max_episode_steps=12, run="act"), tmp_path / "out"
    )
    assert outcome.exit_code == 0, outcome.explain()
    records = outcome.episodes("act")
    assert len(records) == 3 and all(r["outcome"] != "error" for r in records), outcome.explain()
    assert all(r["steps"] == 12 for r in records)
    assert all(r["latency"]["requests"] == 3 for r in records)  # 12 steps, 5-action chunks replayed open-loop
    run_result = json.loads((outcome.output_dir / "act" / "run_result.json").read_text())
    model = run_result["model"]
    assert model["server_task"] == "lerobot" and model["checkpoint"] == str(checkpoint)
    meta = model["server_metadata"]
    assert (meta["policy_type"], meta["serving"], meta["actions_per_request"]) == ("act", "chunk", 5)
    assert set(meta["input_features"]) == {"observation.state", "observation.environment_state"}
    # it loaded, which only the lerobot venv can (arena's own interpreter has no lerobot); arena stopped it:
    # its process and port are gone
    log = (outcome.output_dir / "act" / "server.log").read_text()
    assert "serving lerobot on ws://127.0.0.1:" in log
    with pytest.raises(ProcessLookupError):
        os.kill(run_result["server"]["pid"], 0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", run_result["server"]["port"]), timeout=2).close()


def test_a_server_that_drops_running_episodes_states_tells_the_records_and_the_run(built, tmp_path, monkeypatch):
    """Issue 38 item 6: with fewer per-env states (``max_states``) than envs, the step-served
    ACT's temporal ensembler of a running episode is dropped; the reply says so, the episode's
    record counts it and the run's warnings name it."""
    checkpoint = _checkpoint_and_adapter("act-ensemble-state", built, monkeypatch)
    policy = {
        "type": "lerobot_remote", "policy_path": str(checkpoint), "embodiment": "test-metaworld-state", "device": "cpu",
        "max_states": 1,
    }
    outcome = run_tiny_experiment(tiny_experiment(policy, episodes=2, num_envs=2, max_episode_steps=4, run="act"), tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    records = outcome.episodes("act")
    assert len(records) == 2 and all(r["outcome"] != "error" for r in records), outcome.explain()
    restarts = [(r.get("policy_extras") or {}).get("lerobot_state_restarts", 0) for r in records]
    assert sum(restarts) > 0, records  # two envs, one state: they take it from each other mid-episode
    run_result = json.loads((outcome.output_dir / "act" / "run_result.json").read_text())
    assert run_result["model"]["server_metadata"]["max_states"] == 1
    assert any("dropped the policy state of" in w and "max_states" in w for w in run_result["warnings"]), run_result["warnings"]
