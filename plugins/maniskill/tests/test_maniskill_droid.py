"""The DROID adapter path on a ManiSkill Panda (``maniskill_droid``, openpi family): the
mapping, its inverse and one request end to end against the openpi server double with the real
environment (its workers under the ``maniskill`` venv)."""

from __future__ import annotations

import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.errors import ObservationError
from arena.testing.venvs import benchmark_python
from arena_maniskill.droid import ManiSkillDroidAdapter, droid_actions, droid_layout, gripper_position, maniskill_actions

IMAGE = 64


def _observation(qpos: np.ndarray, cameras=("base_camera_rgb", "hand_camera_rgb")) -> dict:
    n = len(qpos)
    rng = np.random.default_rng(0)
    return {
        "camera_obs": {c: rng.integers(0, 255, (n, IMAGE, IMAGE, 3), dtype=np.uint8) for c in cameras},
        "policy": {"qpos": np.asarray(qpos, np.float32), "qvel": np.zeros((n, 9), np.float32)},
        "task": ["pick up the red cube"] * n,
    }


def test_the_layout_maps_panda_joints_and_fingers_to_droids():
    qpos = np.zeros((3, 9))
    qpos[:, :7] = np.arange(7) / 10
    qpos[:, 7:] = [[0.04, 0.04], [0.02, 0.02], [0.0, -0.002]]  # open, half, closed (squeezing)
    layout = droid_layout(_observation(qpos))
    assert np.allclose(layout["policy"]["joint_pos"], qpos[:, :7])
    assert layout["policy"]["gripper_pos"].shape == (3, 1)
    assert np.allclose(layout["policy"]["gripper_pos"][:, 0], [0.0, 0.5, 1.0], atol=1e-6)  # float32 joints
    assert np.allclose(gripper_position(qpos), layout["policy"]["gripper_pos"], atol=1e-6)
    assert sorted(layout["camera_obs"]) == ["external_camera_rgb", "wrist_camera_rgb"]
    assert layout["task"] == ["pick up the red cube"] * 3


def test_a_panda_without_a_wrist_camera_is_refused_with_the_fix():
    with pytest.raises(ObservationError, match="robot: panda_wristcam"):
        droid_layout(_observation(np.zeros((1, 9)), cameras=("base_camera_rgb",)))
    with pytest.raises(ObservationError, match=r"policy/qpos \(N, 9\)"):
        droid_layout({"policy": {"qpos": np.zeros((1, 7))}})


def test_droid_gripper_0_open_1_closed_becomes_maniskills_plus_1_open_minus_1_closed():
    chunk = np.zeros((3, 8))
    chunk[:, :7] = 0.3
    chunk[:, 7] = [0.0, 0.5, 1.0]
    actions = maniskill_actions(chunk)
    assert np.array_equal(actions[:, 7], [1.0, 0.0, -1.0]) and np.array_equal(actions[:, :7], chunk[:, :7])
    assert np.array_equal(droid_actions(actions), chunk)
    adapter = ManiSkillDroidAdapter()
    assert np.array_equal(adapter.unpack_actions(adapter.pack_actions(actions), "actions"), actions)
    assert np.array_equal(adapter.pack_actions(actions)["actions"], chunk)


def test_the_request_is_openpis_droid_request():
    from arena_openpi.testing import validate_droid_request

    qpos = np.zeros((2, 9))
    qpos[:, 7:] = 0.04
    adapter = ManiSkillDroidAdapter()
    request = adapter.pack_request(adapter.extract(_observation(qpos), 1), "pick up the red cube")
    validate_droid_request(request)  # the double's checks: keys, uint8 (224, 224, 3), float64 (7,), (1,)
    assert request["observation/gripper_position"].tolist() == pytest.approx([0.0], abs=1e-6)  # open
    assert adapter.chunk_length_by_variant == {"pi05": 15, "pi0": 10}


def test_the_adapter_is_registered_in_the_openpi_family():
    from arena.plugins import get_registry

    assert get_registry().adapter("openpi", "maniskill_droid") is ManiSkillDroidAdapter


def _run(**environment) -> object:
    return load_experiment_dict(
        {
            "runs": {
                "droid": {
                    "environment": {
                        "type": "maniskill", "task": "PickCube-v1", "obs_mode": "rgb", "robot": "panda_wristcam",
                        "control_mode": "pd_joint_pos", "image_height": IMAGE, "image_width": IMAGE, **environment,
                    },
                    "policy": {"type": "pi0_remote", "policy_variant": "pi05", "embodiment": "maniskill_droid",
                               "remote_host": "127.0.0.1", "remote_port": 1},
                    "server": {"external": True},
                }
            }
        },
        source="droid.yaml",
    ).runs["droid"]


@pytest.mark.slow
def test_one_request_end_to_end_against_the_openpi_double_steps_the_maniskill_env():
    """The observation ManiSkill renders, mapped for DROID, is a request the double accepts
    (keys, shapes, dtypes); its chunk (the current joints and gripper on every row) steps the
    env through pd_joint_pos and holds the Panda still, fingers open: with the gripper passed
    unconverted (0 = half closed in ManiSkill) the fingers would close."""
    from arena.envs.workers import build_environment
    from arena_openpi.testing import openpi_server_double

    benchmark_python("maniskill")
    run = _run()
    env = build_environment(run.environment_cls, run.environment, num_envs=1, plan=run.worker_plan)
    try:
        with openpi_server_double("droid", "pi05") as server:
            config = run.policy.model_copy(update={"remote_host": server.host, "remote_port": server.port})
            policy = run.policy_cls(config)
            policy.start(env)
            policy.set_task_description(env.task_description)
            obs = env.reset_envs([0], [0])
            policy.reset([0], [0])
            start = np.asarray(obs["policy"]["qpos"], np.float64)
            assert obs["camera_obs"]["hand_camera_rgb"].shape == (1, IMAGE, IMAGE, 3)
            first = None
            for _ in range(16):
                action = policy.get_action(env, obs)
                first = action if first is None else first
                obs, *_ = env.step(action)
            policy.close()
            requests = list(server.model.requests)
    finally:
        env.close()
    assert len(requests) == 2  # pi05: 15 rows replayed per request
    request = requests[0]
    assert request["observation/exterior_image_1_left"].shape == (224, 224, 3)
    assert request["observation/wrist_image_left"].dtype == np.uint8
    assert np.allclose(request["observation/joint_position"], start[0, :7], atol=1e-6)
    assert request["observation/gripper_position"].dtype == np.float64
    assert request["prompt"] == env.task_description
    assert first.shape == (1, 8) and first[0, 7] == pytest.approx(1.0, abs=1e-4)  # DROID 0 (open) -> ManiSkill +1
    qpos = np.asarray(obs["policy"]["qpos"], np.float64)
    assert np.abs(qpos[0, :7] - start[0, :7]).max() < 0.01  # held in place
    assert qpos[0, 7:].min() > 0.039  # fingers still open
