"""The ``lerobot_env`` bridge (issue 36 item 3): a LeRobot env config evaluated through arena
gives the very episodes ``lerobot-eval`` 0.6 gives.

A random ACT checkpoint (deterministic: no VAE sampling at inference) is evaluated on LeRobot's
PushT env config (``{type: pusht, episode_length: 40}``; on Meta-World's reach-v3, 8 steps an
episode, with one env and two (two runs of one experiment); and on lerobot-env-so101's
``so101`` and ALOHA's transfer cube, two envs each) twice: by LeRobot's own ``eval_policy`` as
``lerobot-eval`` calls it (``bridge_reference.py``, batch size 1, seeds 1000..), and by
``arena run`` (environment ``lerobot_env`` in the lerobot venv's env workers, ``lerobot_remote``
served by ``arena serve lerobot``, seed 1000) with one env and with two env workers. Per
episode the seed, every action, the length, success, ``sum_reward`` (the record's ``return``)
and ``max_reward`` (the ``max_reward`` metric) must be equal. The policy runs in the reference-exact
serving mode (``reference_exact: true``: the server answers one request per forward pass on one
torch thread, as the reference computes with ``OMP_NUM_THREADS=1``; arena's own processes get no
thread setting): a batched forward pass, or one split over another number of threads, may round
the last float32 bit differently, which PushT's contacts then amplify (README, "Reference-exact
serving"); test_serving.py covers batching.

CPU budget (issue 46): the four references come from one ``bridge_reference.py many`` process
and all arena runs from one experiment (module fixtures; the runs of one env config share one
server); each test only reads its cases' results.

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

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # the first test pays the module's fixtures

HERE = Path(__file__).resolve().parent
ENV = {"type": "pusht", "episode_length": 40}
#: lerobot-env-so101 (PyPI, a third-party lerobot_env_* package: registered by
#: register_third_party_plugins), state only: 14-dim agent_pos, 3-dim environment_state.
SO101 = {"type": "so101", "episode_length": 10}
#: gym-aloha's transfer cube (480x640 top camera + 14-dim qpos, 14 joint targets), short episodes.
ALOHA = {"type": "aloha", "task": "AlohaTransferCube-v0", "episode_length": 10}
#: LeRobot's Meta-World (metaworld==3.0.0 in the lerobot venv): 480x480 corner2 camera + 4-dim
#: agent_pos, 4 actions. Its episodes are 500 steps whatever ``episode_length`` says, so both
#: sides stop at METAWORLD_STEPS (lerobot-eval's limit is the env's ``_max_episode_steps``).
METAWORLD = {"type": "metaworld", "task": "metaworld-reach-v3"}
METAWORLD_STEPS = 8
EPISODES = 3
SEED = 1000
#: Each env config of the module: (config, env-worker counts of its arena runs, max steps).
#: Meta-World last: its reference re-seeds the global numpy generator (bridge_reference.py).
CASES = {
    "pusht": (ENV, (1, 2), None),
    "so101": (SO101, (2,), None),
    "aloha": (ALOHA, (2,), None),
    "metaworld": (METAWORLD, (1, 2), METAWORLD_STEPS),
}


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Each case's checkpoint and reference result, all from one ``bridge_reference.py many``
    process (one LeRobot + torch start-up for the module; ``OMP_NUM_THREADS=1``)."""
    root = tmp_path_factory.mktemp("bridge")
    jobs = [
        {"dir": str(root / name / "pretrained_model"), "env": config, "episodes": EPISODES, "batch": 1, "seed": SEED,
         "out": str(root / name / "ref.json"), **({"max_steps": steps} if steps is not None else {})}
        for name, (config, _, steps) in CASES.items()
    ]
    for name in CASES:
        (root / name).mkdir()
    (root / "jobs.json").write_text(json.dumps(jobs))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(benchmark_python("lerobot")), str(HERE / "bridge_reference.py"), "many", str(root / "jobs.json")],
                          capture_output=True, text=True, timeout=1500, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return {name: (root / name / "pretrained_model", json.loads((root / name / "ref.json").read_text())) for name in CASES}


@pytest.fixture(scope="module")
def bridge_runs(references, tmp_path_factory):
    """One ``arena run`` experiment holding every case's runs (``<case>_<num_envs>``), each
    served by ``arena serve lerobot`` in the reference-exact mode; the runs of one case share
    its server. Tests only read its records."""
    policies = {
        name: {"type": "lerobot_remote", "policy_path": str(references[name][0]), "device": "cpu", "reference_exact": True}
        for name in CASES
    }
    runs = {
        f"{name}_{n}": {
            "environment": {"type": "lerobot_env", "env": config},
            "policy": policies[name],
            "environment_builder": {"num_envs": n, "seed": SEED},
            "rollout_limit": {"num_episodes": EPISODES} | ({"max_episode_steps": steps} if steps else {}),
            "trajectories": {"enabled": True},
        }
        for name, (config, counts, steps) in CASES.items()
        for n in counts
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OMP_NUM_THREADS", raising=False)  # the mode pins the server's threads itself
        return run_tiny_experiment({"runs": runs}, tmp_path_factory.mktemp("arena") / "out")


@pytest.mark.parametrize("num_envs", [1, 2])
def test_lerobot_env_pusht_equals_lerobot_eval(num_envs, references, bridge_runs):
    """Episode by episode, and the run's figures under lerobot-eval's names equal its own
    ``aggregated`` block (``avg_sum_reward``, ``avg_max_reward``, ``pc_success``)."""
    _check_equal("pusht", (num_envs,), references, bridge_runs, aggregated=references["pusht"][1]["aggregated"])


def test_lerobot_env_so101_equals_lerobot_eval_with_two_envs(references, bridge_runs):
    """so101 reports success as ``succeed``, not ``is_success``: lerobot-eval 0.6.1 then reads
    ``final_info.get("is_success", [False] * n)``, a list without ``tolist``, and takes
    ``[bool([False])]`` = ``[True]``: every so101 episode it runs counts as a success. arena
    reads the same missing key as no success; everything else must be equal."""
    _check_equal("so101", (2,), references, bridge_runs, rewards_vary=False, lerobot_eval_counts_missing_success=True)


def test_lerobot_env_aloha_equals_lerobot_eval_with_two_envs(references, bridge_runs):
    _check_equal("aloha", (2,), references, bridge_runs, rewards_vary=False)


def test_lerobot_metaworld_seed_fixes_the_scene(references):
    """LeRobot 0.6.1's Meta-World draws each scene from the env's own generator, seeded by the
    episode seed (``envs/metaworld.py`` l.157-158, 225-226: ``seeded_rand_vec``): the same seed
    gives the same object/goal vector at batch size 1, in another slot of a batch of two and
    after the global numpy generator moved; two seeds give two scenes."""
    scenes = references["metaworld"][1]["scenes"]
    first, second = scenes["batch1"]
    assert not np.allclose(first, second)
    np.testing.assert_array_equal(scenes["batch2_swapped"], scenes["batch1"])
    np.testing.assert_array_equal(scenes["global_reseeded"], scenes["batch1"])


def test_lerobot_env_metaworld_equals_lerobot_eval_with_one_env_and_two(references, bridge_runs):
    """Meta-World reach-v3 (the corner2 camera at LeRobot's pose, 480x480), 8 steps an episode
    on both sides; a random ACT earns reach's dense reward, which varies with the scene. Two
    runs (one env, two env workers) sharing one policy server."""
    _check_equal("metaworld", (1, 2), references, bridge_runs)


def _check_equal(
    case: str, num_envs: tuple[int, ...], references, outcome, rewards_vary: bool = True,
    lerobot_eval_counts_missing_success: bool = False, aggregated: dict | None = None,
) -> None:
    """The module experiment's runs ``<case>_<n>`` (n in ``num_envs``) against the case's
    reference episodes."""
    expected = references[case][1]["episodes"]
    assert outcome.exit_code == 0, outcome.explain()
    if rewards_vary:
        assert any(e["sum_reward"] > 0 for e in expected)  # the comparison of rewards can fail
    for n in num_envs:
        run = f"{case}_{n}"
        _check_run(outcome, run, CASES[case][0], expected, lerobot_eval_counts_missing_success)
        if aggregated is not None:  # lerobot-eval's own figures, under its names
            named = outcome.result["runs"][run]["as_reported"]
            assert named["by"] == "lerobot-eval", named
            for name in ("avg_sum_reward", "avg_max_reward", "pc_success"):
                figure = named["figures"][name]
                assert figure["mean"] == pytest.approx(aggregated[name], abs=1e-6), (run, name, figure, aggregated)
                assert figure["ci_low"] <= figure["mean"] <= figure["ci_high"], (run, name, figure)


def _check_run(outcome, run: str, env_config: dict, expected: list[dict], lerobot_eval_counts_missing_success: bool) -> None:
    records = sorted(outcome.episodes(run), key=lambda r: r["episode_index"])
    assert len(records) == EPISODES, run
    for record, ref in zip(records, expected, strict=True):
        where = f"{run}: episode {record['episode_index']} (seed {record['seed']})"
        assert record["seed"] == ref["seed"], where
        assert record["steps"] == ref["steps"], where
        if lerobot_eval_counts_missing_success:
            assert ref["success"] is True and record["outcome"] in ("timeout", "failure"), where
        else:
            assert (record["outcome"] == "success") == ref["success"], where
        assert record["return"] == pytest.approx(ref["sum_reward"], abs=1e-9), where
        assert record["metrics"]["max_reward"] == pytest.approx(ref["max_reward"], abs=1e-9), where
        if env_config["type"] == "pusht":  # the bridge reports the env's coverage: gym-pusht's reward is its rescaling
            assert record["metrics"]["max_reward"] == pytest.approx(min(record["metrics"]["coverage"] / 0.95, 1.0), abs=1e-9)
        trajectory = read_trajectory(outcome.output_dir / run / record["trajectory"])
        np.testing.assert_array_equal(
            np.asarray(trajectory.action, np.float32), np.asarray(ref["actions"], np.float32), err_msg=where
        )
    first = records[0]
    assert first["protocol"]["benchmark"] == f"lerobot_env:{env_config['type']}"
    result = json.loads((outcome.output_dir / run / "run_result.json").read_text())
    assert result["model"]["server_metadata"]["torch_threads"] == 1, run  # reference_exact pinned the server
    # the recorded sizes are the frames' (PushT: 96x96, where LeRobot's config says 384)
    frames = read_trajectory(outcome.output_dir / run / first["trajectory"]).observations.get("camera_obs", {})
    assert first["protocol"]["frame_shapes"] == {name: list(f.shape[1:3]) for name, f in frames.items()}, run
    config = first["protocol"]["env_config"]
    if "observation_height" in config:
        assert [[config["observation_height"], config["observation_width"]]] == [list(f.shape[1:3]) for f in frames.values()]
    if "episode_length" in env_config:
        assert first["protocol"]["env_config"]["episode_length"] == env_config["episode_length"]
