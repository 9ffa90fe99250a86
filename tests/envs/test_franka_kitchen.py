"""franka_kitchen: Gymnasium-Robotics' Franka Kitchen in the DROID layout."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium_robotics")

from arena.envs.franka_kitchen import (  # noqa: E402
    ACTION_DIM,
    TASKS,
    FrankaKitchenConfig,
    FrankaKitchenEnvironment,
    build_model,
    check_task_name,
)

H, W = 32, 48  # small frames: software rendering dominates the step time


@pytest.fixture(scope="module")
def env():
    e = FrankaKitchenEnvironment(
        FrankaKitchenConfig(task="microwave", image_height=H, image_width=W), num_envs=2
    )
    yield e
    e.close()


def hold(obs: dict, gripper: float = 0.0) -> np.ndarray:
    """Actions that keep every env's arm where it is."""
    n = obs["policy"]["joint_pos"].shape[0]
    return np.concatenate([obs["policy"]["joint_pos"], np.full((n, 1), gripper)], axis=1).astype(np.float32)


@pytest.mark.slow
def test_observation_has_the_droid_layout(env):
    obs = env.reset_envs([0, 1], [1, 2])
    cams = obs["camera_obs"]
    assert sorted(cams) == ["external_camera_2_rgb", "external_camera_rgb", "wrist_camera_rgb"]
    for frames in cams.values():
        assert frames.dtype == np.uint8 and frames.shape == (2, H, W, 3)
        assert frames.std() > 0  # rendered, not blank
    assert obs["policy"]["joint_pos"].shape == (2, 7) and obs["policy"]["joint_pos"].dtype.kind == "f"
    assert obs["policy"]["gripper_pos"].shape == (2, 1) and obs["policy"]["gripper_pos"].dtype.kind == "f"
    assert np.all((obs["policy"]["gripper_pos"] >= 0) & (obs["policy"]["gripper_pos"] <= 1))
    assert obs["task"] == ["microwave", "microwave"]
    assert env.action_space.shape == (ACTION_DIM,) == (8,)
    assert env.task_description == TASKS["microwave"][1]
    assert env.default_max_episode_steps == 280


@pytest.mark.slow
def test_same_seed_gives_the_same_episode_on_any_env(env):
    obs = env.reset_envs([0, 1], [7, 7])
    assert np.array_equal(obs["policy"]["joint_pos"][0], obs["policy"]["joint_pos"][1])
    assert np.array_equal(obs["camera_obs"]["wrist_camera_rgb"][0], obs["camera_obs"]["wrist_camera_rgb"][1])
    target = hold(obs)
    target[:, 0] += 0.1
    for _ in range(2):
        obs, *_ = env.step(target)
    assert np.array_equal(obs["policy"]["joint_pos"][0], obs["policy"]["joint_pos"][1])
    other = env.reset_envs([1], [8])
    assert not np.allclose(other["policy"]["joint_pos"][0], other["policy"]["joint_pos"][1])


@pytest.mark.slow
def test_actions_are_absolute_joint_positions_and_gripper(env):
    obs = env.reset_envs([0, 1], [3, 3])
    start = obs["policy"]["joint_pos"].copy()
    target = hold(obs)
    target[0, 0] += 0.1  # env 0: first joint +0.1 rad, within one step of the velocity limit
    target[0, 7] = 1.0  # env 0: close the gripper
    for _ in range(6):
        obs, reward, terminated, truncated, info = env.step(target)
    moved = obs["policy"]["joint_pos"][0, 0] - start[0, 0]
    assert moved == pytest.approx(0.1, abs=0.03)
    assert abs(obs["policy"]["joint_pos"][1, 0] - start[1, 0]) < 0.03
    assert obs["policy"]["gripper_pos"][0, 0] > 0.8
    assert obs["policy"]["gripper_pos"][1, 0] < 0.2
    assert info["success"].dtype == bool and not info["success"].any()
    assert not terminated.any() and not truncated.any()


@pytest.mark.slow
def test_success_is_the_benchmarks_own_task_completion(env):
    obs = env.reset_envs([0, 1], [0, 1])
    # Open env 0's microwave door to the benchmark's goal angle (-0.75 rad).
    data = env._kitchens[0].data
    joint = env._model.joint("microwave").qposadr[0]
    data.qpos[joint] = -0.75
    obs, reward, terminated, truncated, info = env.step(hold(obs))
    assert info["success"].tolist() == [True, False]
    assert terminated.tolist() == [True, False]
    assert reward[0] == 1.0


@pytest.mark.slow
def test_wrong_action_shape_is_an_error(env):
    with pytest.raises(ValueError, match=r"\(2, 8\)"):
        env.step(np.zeros((2, 9), np.float32))


def test_task_names_accept_the_benchmarks_spelling_and_suggest_on_typos():
    assert check_task_name("light switch") == "light_switch"
    assert FrankaKitchenConfig(task="slide cabinet").task == "slide_cabinet"
    with pytest.raises(ValueError, match="did you mean microwave"):
        check_task_name("microwav")
    assert all(desc for _, desc in TASKS.values())


def test_model_has_the_added_wrist_and_exterior_cameras():
    model = build_model()
    names = {model.camera(i).name for i in range(model.ncam)}
    assert {"wrist_cam", "exterior_left", "exterior_right", "left_cap", "right_cap"} <= names
    assert model.nu == 9  # the benchmark's actuators are unchanged


@pytest.mark.slow
def test_the_environment_contract_holds_seeding_across_processes_included():
    from arena.testing.environments import check_environment

    config = FrankaKitchenConfig(task="microwave", image_height=H, image_width=W)
    report = check_environment(FrankaKitchenEnvironment, config, steps=2)
    assert report["observation"]["policy/joint_pos"] == [[2, 7], "float32"] and report["action_dim"] == ACTION_DIM
    assert report["success_key"] == "success" and report["protocol"]["benchmark"] == "franka_kitchen"


def test_franka_kitchen_is_a_registered_environment():
    from arena.plugins import get_registry

    assert get_registry().environments["franka_kitchen"] is FrankaKitchenEnvironment


def test_episode_info_carries_the_protocol_fingerprint_of_the_episodes(env):
    from importlib import metadata

    protocol = env.episode_info(0)["protocol"]
    assert protocol["benchmark"] == "franka_kitchen"
    assert protocol["suite_version"] == metadata.version("gymnasium-robotics")
    assert protocol["simulators"]["mujoco"] == metadata.version("mujoco")
    assert protocol["cameras"] and protocol["image_size"] == [env.config.image_height, env.config.image_width]
    assert protocol["step_limit"] == 280
