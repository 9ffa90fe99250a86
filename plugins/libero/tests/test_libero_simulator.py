"""The libero environment with the real simulator, in workers under the LIBERO venv, driven
from arena's own interpreter: the observation layout, episodes, the expert and zero actions
through ``arena run``, and a pi0_remote run against the openpi double.

Slow: LIBERO builds an env in seconds and resets it in ~2-4 s on a CPU; images are kept
small and episodes short.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from arena_libero import catalog
from arena_libero.env import LiberoConfig, LiberoEnvironment
from arena.testing.venvs import benchmark_python

pytestmark = pytest.mark.slow


def libero_python() -> Path:
    """The LIBERO venv's interpreter (``scripts/setup-env.sh test`` makes it; skipped without, failed under CI)."""
    return benchmark_python("libero", "arena libero setup")


def _build(python: Path, num_envs: int = 2, **fields):
    from arena.envs.workers import build_environment

    config = LiberoConfig(suite="libero_spatial", task=0, python=str(python), **fields)
    return build_environment(LiberoEnvironment, config, num_envs=num_envs)


@pytest.fixture(scope="module")
def camera_env():
    """Two LIBERO envs with both cameras at 32 x 32 in one worker under the LIBERO venv, built
    once for the module's tests that read images (a build with cameras costs ~15 s of CPU)."""
    env = _build(libero_python(), num_envs=2, image_size=32, cameras=True)
    yield env
    env.close()


@pytest.mark.timeout(1200)
def test_simulator_perturbations_move_the_agentview_camera_and_the_objects_only(camera_env):
    from arena.envs.perturbed import wrap
    from arena.envs.workers import build_environment

    config = LiberoConfig(suite="libero_spatial", task=0, python=str(libero_python()), image_size=32, cameras=True,
                          perturbations={"camera_shift": 0.1, "object_offset": 0.03})
    moved = wrap(build_environment(LiberoEnvironment, config, num_envs=1), LiberoEnvironment, config)
    try:
        a, b = camera_env.reset_envs([0], [3]), moved.reset_envs([0], [3])
        a = {group: {k: v[:1] for k, v in a[group].items()} for group in ("camera_obs", "policy", "privileged")}
        assert not np.array_equal(a["camera_obs"]["agentview_rgb"], b["camera_obs"]["agentview_rgb"])
        np.testing.assert_array_equal(a["policy"]["joint_pos"], b["policy"]["joint_pos"])  # the robot is where it was
        shift = [np.hypot(*(b["privileged"][k][0][:2] - a["privileged"][k][0][:2])) for k in a["privileged"]]
        assert max(shift) == pytest.approx(0.03, abs=0.01)  # objects moved 3 cm (then settled for the wait steps)
        assert moved.episode_info(0)["protocol"]["perturbations"] == {"camera_shift": 0.1, "object_offset": 0.03}
    finally:
        moved.close()


@pytest.mark.timeout(1200)
def test_camera_episode_has_the_openpi_adapter_layout_in_a_libero_venv_worker(camera_env):
    env = camera_env
    assert type(env).__name__ == "WorkerEnvironment"  # not this interpreter: the LIBERO venv's
    assert env.action_space.shape == (7,) and env.default_max_episode_steps == 220
    assert env.task_description == catalog.find_task("libero_spatial", 0).language
    obs = env.reset_envs([0, 1], [3, 53])
    cams, policy = obs["camera_obs"], obs["policy"]
    assert set(cams) == {"agentview_rgb", "eye_in_hand_rgb"}
    for frames in cams.values():
        assert frames.dtype == np.uint8 and frames.shape == (2, 32, 32, 3)
    shapes = {k: v.shape for k, v in policy.items()}
    assert shapes == {"eef_pos": (2, 3), "eef_quat": (2, 4), "gripper_qpos": (2, 2), "joint_pos": (2, 7),
                      "controller_eef_pos": (2, 3), "controller_eef_ori_mat": (2, 9)}
    assert np.allclose(np.linalg.norm(policy["eef_quat"], axis=1), 1.0, atol=1e-6)
    assert obs["task"] == [env.task_description] * 2
    assert set(obs["privileged"]) >= {"akita_black_bowl_1_pos", "plate_1_pos"}
    # Seeds 3 and 53 both mean init state 3: the same scene, recorded as such.
    assert np.allclose(policy["joint_pos"][0], policy["joint_pos"][1], atol=1e-9)
    assert [env.episode_info(e)["init_state"] for e in (0, 1)] == [3, 3]
    # Videos are upright: render() is the agentview frame turned by 180 degrees.
    assert np.array_equal(env.render(0), cams["agentview_rgb"][0, ::-1, ::-1])

    action = np.zeros((2, 7), np.float32)
    action[:, 2] = 1.0  # up
    action[:, 6] = -1.0
    obs2, reward, terminated, truncated, info = env.step(action)
    assert obs2["policy"]["eef_pos"][0, 2] > policy["eef_pos"][0, 2]
    assert info["success"].dtype == bool and not info["success"].any() and not terminated.any()
    # A wrong action shape is refused in the worker; its envs' episodes end as errors.
    _, _, _, _, info = env.step(np.zeros((2, 4), np.float32))
    assert sorted(info["env_errors"]) == [0, 1]
    assert "actions must have shape (2, 7), got (2, 4)" in info["env_errors"][0]


def test_the_environment_contract_holds_in_the_libero_venv():
    # arena.testing's conformance check in the LIBERO venv; seeding across processes is checked
    # against openpi's client by test_openpi_libero_reference (a second LIBERO build costs CI ~1 min)
    from arena.testing.environments import check_environment_in_venv

    config = {"suite": "libero_spatial", "task": 0, "image_size": 32, "num_steps_wait": 2}
    report = check_environment_in_venv(
        "libero", "arena_libero.env:LiberoEnvironment", config, setup_command="arena libero setup",
        num_envs=1, seeds=[3], steps=1, across_processes=False, timeout_s=1200,
    )
    assert report["observation"]["camera_obs/agentview_rgb"] == [[1, 32, 32, 3], "uint8"]
    assert report["success_key"] == "success" and report["protocol"]["benchmark"] == "libero"


def _arena_run(experiment: Path, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", "run", str(experiment), "--output-dir", str(out), *overrides],
        capture_output=True, text=True, timeout=1500,
    )


def _records(out: Path, run: str) -> list[dict]:
    return [json.loads(line) for line in (out / run / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.timeout(1800)  # minutes on a loaded 2-core machine
def test_expert_succeeds_and_zero_actions_never_do_through_arena_run(tmp_path):
    libero_python()  # no python key: the workers run under the environment's default venv
    experiment = tmp_path / "libero.yaml"
    experiment.write_text(
        """
launch: {backend: local, local: {jobs: 1}}
shared:
  environment: {type: libero, suite: libero_spatial, task: 0, cameras: false}
  environment_builder: {seed: 0}
runs:
  expert:
    policy: {type: libero_pick_place_expert}
    rollout_limit: {num_episodes: 2}
  zero:
    policy: {type: zero_action}
    rollout_limit: {num_episodes: 1, max_episode_steps: 25}
"""
    )
    done = _arena_run(experiment, tmp_path / "out")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expert, zero = _records(tmp_path / "out", "expert"), _records(tmp_path / "out", "zero")
    assert [r["outcome"] for r in expert] == ["success", "success"]
    assert [r["env_extras"]["init_state"] for r in expert] == [0, 1]
    assert all(50 < r["steps"] < 220 for r in expert)
    # The 10 settling steps count neither in steps nor against the limit.
    assert [(r["outcome"], r["steps"]) for r in zero] == [("timeout", 25)]
    result = json.loads((tmp_path / "out" / "experiment_result.json").read_text())
    assert result["runs"]["expert"]["task"].startswith("libero_spatial/pick_up_the_black_bowl_between")


@pytest.mark.timeout(1800)
def test_pi0_remote_run_against_the_openpi_double_sends_the_libero_example_requests(tmp_path):
    from arena_openpi.testing import openpi_server_double

    with openpi_server_double("libero", "pi05") as server:
        experiment = tmp_path / "pi05.yaml"
        experiment.write_text(
            f"""
runs:
  spatial:
    environment: {{type: libero, suite: libero_spatial, image_size: 128, python: "{libero_python()}"}}
    policy: {{type: pi0_remote, policy_variant: pi05, openpi_embodiment_adapter: libero,
              remote_host: 127.0.0.1, remote_port: {server.port}}}
    server: {{external: true}}
    rollout_limit: {{num_episodes: 1, max_episode_steps: 7}}
    recording: {{enabled: true, camera: agentview_rgb}}
"""
        )
        done = _arena_run(experiment, tmp_path / "out", "runs.spatial.environment.task=1")
        requests = list(server.model.requests)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # One task given: no expansion. 7 steps replaying 5 rows per chunk: 2 requests, each
    # validated by the double exactly as openpi's example sends them.
    (record,) = _records(tmp_path / "out", "spatial")
    assert record["outcome"] == "timeout" and record["steps"] == 7 and record["env_extras"] == {"init_state": 0, "seeding": "reference"}
    assert len(requests) == 2
    language = catalog.find_task("libero_spatial", 1).language
    for request in requests:
        assert request["prompt"] == language
        assert request["observation/image"].shape == (224, 224, 3) and request["observation/state"].shape == (8,)
    assert record["video"] and (tmp_path / "out" / "spatial" / record["video"]).exists()


@pytest.mark.timeout(900)
def test_action_dtype_float32_hands_libero_lerobot_evals_float32_rows():
    """``action_dtype: float32``: LIBERO's ``step`` receives each row as float32, byte for byte
    the row lerobot-eval hands LeRobot's LiberoEnv (float64 actions rounded as it rounds them);
    the fingerprint says so. The default float64 path is openpi's, pinned bit for bit by
    test_openpi_libero_reference.py. One env, no camera (~20 s, most of it LIBERO's build)."""
    from arena.testing.venvs import run_in_venv

    checks = Path(__file__).with_name("libero_checks.py")
    result = run_in_venv("libero", str(checks), "float32_actions", setup_command="arena libero setup", timeout_s=800)
    assert result == {"dtypes": ["float32", "float32"], "equal_to_lerobot_row": True, "rounded": True,
                      "protocol_action_dtype": "float32"}
    assert LiberoConfig(suite="libero_spatial", task=0).action_dtype == "float64"
