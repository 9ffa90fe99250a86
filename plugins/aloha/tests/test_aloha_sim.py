"""The ``aloha`` environment against gym-aloha itself, under the ALOHA sim venv's interpreter.

Each test runs ``sim_checks.py`` with the venv's Python (``arena aloha setup`` creates it; the
suite's own interpreter has another MuJoCo) and asserts on the JSON it prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.testing.environments import check_environment_in_venv
from arena.testing.venvs import run_in_venv

CHECKS = Path(__file__).with_name("sim_checks.py")


GL = {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}


def sim_check(*args: str) -> dict:
    return run_in_venv("aloha", str(CHECKS), *args, setup_command="arena aloha setup", env=GL)


@pytest.mark.slow
def test_the_environment_contract_holds_in_the_aloha_venv():
    # arena.testing's conformance check, seeding across processes included (one env per worker)
    config = {"task": "transfer_cube", "cameras": ["cam_high"], "image_height": 48, "image_width": 64}
    report = check_environment_in_venv(
        "aloha", "arena_aloha.env:AlohaEnvironment", config, setup_command="arena aloha setup", env=GL, steps=2
    )
    assert report["success_key"] == "is_success" and report["action_dim"] == 14
    assert report["observation"]["camera_obs/cam_high_rgb"] == [[2, 48, 64, 3], "uint8"]


@pytest.mark.slow
def test_env_steps_bit_for_bit_like_gym_aloha_for_both_tasks():
    """Same seed, same float64 actions: identical joints, staged rewards, success and top frames."""
    result = sim_check("parity")
    for task in ("transfer_cube", "insertion"):
        assert result[task] == {"joint_max_abs_diff": 0.0, "frames_equal": True, "rewards_equal": True}, task


@pytest.mark.slow
def test_action_dtype_float32_steps_gym_aloha_as_lerobot_eval_does():
    """``action_dtype: float32`` sets the actuator targets and joints gym-aloha gets from
    lerobot-eval's float32 rows, bit for bit; the default those of float64 rows (today's); on
    float32-valued actions the two differ (gym-aloha's gripper targets in the action's dtype)."""
    result = sim_check("float32_actions")
    assert result == {"equal_to_gym_aloha": {"float64": True, "float32": True}, "float32_changes_ctrl": True}


@pytest.mark.slow
def test_expert_kinematics_match_mujoco_poses_of_the_scene():
    result = sim_check("kinematics")
    assert result["pos_max_abs_diff_m"] < 1e-4  # the scene turns the right arm by 3.1416, not pi
    assert result["rot_max_abs_diff"] < 1e-4


@pytest.mark.slow
def test_cameras_are_rendered_only_when_listed_and_bounds_come_from_the_model():
    result = sim_check("cameras")
    assert result["no_cameras_keys"] == ["policy", "task"]
    assert result["policy_shapes"] == {"joint_pos": [2, 14], "object_pose": [2, 7]}
    assert result["insertion_object_pose"] == [1, 14]
    assert result["video_frame"] == [[480, 640, 3], "uint8"]  # videos still show the top camera
    shapes = result["camera_shapes"]
    assert sorted(shapes) == ["cam_high_rgb", "cam_left_wrist_rgb", "cam_low_rgb", "cam_right_wrist_rgb"]
    assert all(shape == [[1, 48, 64, 3], "uint8"] for shape in shapes.values())
    assert result["camera_distinct"]
    low, high = result["low"], result["high"]
    # Not gym-aloha's declared Box(-1, 1): waist +-pi, shoulder -1.85..1.26 rad, grippers
    # 0.065..0.975 (the finger range 21..57 mm, normalized as gym-aloha normalizes it).
    for arm in (0, 7):
        assert low[arm] == pytest.approx(-3.14158) and high[arm] == pytest.approx(3.14158)
        assert low[arm + 1] == pytest.approx(-1.85005) and high[arm + 1] == pytest.approx(1.25664)
        assert low[arm + 6] == pytest.approx((0.021 - 0.01844) / 0.03956, abs=1e-5)
        assert high[arm + 6] == pytest.approx((0.057 - 0.01844) / 0.03956, abs=1e-5)
    assert result["episode_info"]["max_reward"] == 0.0
    assert len(result["episode_info"]["initial_object_pose"]) == 7


@pytest.mark.slow
def test_simulator_perturbations_change_what_they_claim_and_nothing_else():
    """Same seed: camera and light change the scene camera only (the wrist camera too for the
    light), the offset moves the cube 5 cm and not the arms, nominal is byte-equal and unwrapped."""
    result = sim_check("perturbations")
    camera, light, offset, mass = (result[k] for k in ("camera_shift", "light_intensity", "object_offset", "object_mass"))
    assert not camera["top_equal"] and camera["wrist_equal"] and camera["joints_equal"] and camera["object_moved_m"] == 0
    assert not light["top_equal"] and not light["wrist_equal"] and light["joints_equal"]
    assert offset["object_moved_m"] == pytest.approx(0.05, abs=1e-6) and offset["joints_equal"]
    assert mass["top_equal"] and mass["joints_equal"] and mass["object_moved_m"] == 0
    assert result["nominal"] == {"wrapped": "AlohaEnvironment", "top_equal": True, "wrist_equal": True,
                                 "joints_equal": True, "object_moved_m": 0.0}


def test_the_stay_action_holds_both_arms_where_zero_targets_swing_them():
    # what a live episode on a measured clock executes before its first chunk (arena.live):
    # measured 0.009 (holding) against 1.2 (zeros) over 10 steps
    moved = sim_check("stay")
    assert moved["stay"] < 0.05 and moved["zeros"] > 0.5, moved
