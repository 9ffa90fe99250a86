"""The ``pusht`` environment against gym-pusht itself, under the PushT venv's interpreter.

Each test runs ``pusht_checks.py`` with the venv's Python (``arena venv setup pusht`` creates
it; the suite's own interpreter has no gym-pusht) and asserts on the JSON it prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.testing.environments import check_environment_in_venv
from arena.testing.venvs import run_in_venv

CHECKS = Path(__file__).with_name("pusht_checks.py")
OBS_TYPES = ("pixels", "pixels_agent_pos", "state", "environment_state_agent_pos")


def pusht_check(*args: str) -> dict:
    return run_in_venv("pusht", str(CHECKS), *args, timeout_s=300)


def test_the_environment_contract_holds_in_the_pusht_venv():
    # arena.testing's conformance check, seeding across processes included
    config = {"obs_type": "pixels_agent_pos", "observation_width": 32, "observation_height": 32}
    report = check_environment_in_venv("pusht", "arena_lerobot.pusht.env:PushTEnvironment", config, timeout_s=300)
    assert report["success_key"] == "is_success" and report["action_dim"] == 2
    assert report["protocol"]["benchmark"] == "pusht"


def test_every_obs_type_steps_value_for_value_like_gym_pusht():
    """Same seeds, same float64 actions, pushes included: gym-pusht's observation under its own
    names, reward, coverage, success and termination, exactly."""
    result = pusht_check("parity")
    for obs_type in OBS_TYPES:
        assert result[obs_type] == {"max_abs_diff": 0.0, "same_keys": True, "rewards_equal": True, "pushed": True}, obs_type


def test_obs_types_lay_out_cameras_state_and_privileged_pose_in_arena_layout():
    result = pusht_check("shapes")
    privileged = {"agent_pos": [[2, 2], "float64"], "block_pose": [[2, 3], "float64"], "goal_pose": [[2, 3], "float64"]}
    image = {"pixels": [[2, 96, 96, 3], "uint8"]}
    expected = {
        "pixels": ({"camera_obs": image, "policy": {}}),
        "pixels_agent_pos": ({"camera_obs": image, "policy": {"agent_pos": [[2, 2], "float64"]}}),
        "state": ({"policy": {"state": [[2, 5], "float64"]}}),
        "environment_state_agent_pos": (
            {"policy": {"agent_pos": [[2, 2], "float64"], "environment_state": [[2, 16], "float64"]}}
        ),
    }
    for obs_type, groups in expected.items():
        got = result[obs_type]
        assert got["keys"] == sorted([*groups, "privileged", "task"]), obs_type
        for group, content in groups.items():
            assert got[group] == content, (obs_type, group)
        assert got["privileged"] == privileged
        assert got["task"] == ["Push the T-shaped block onto the T-shaped target."] * 2
        per_env = {"is_success": [[2], "bool"], "success": [[2], "bool"], "coverage": [[2], "float64"], "reward": [[2], "float64"],
                   "max_reward": [[2], "float64"]}
        assert got["info"] == per_env
        assert got["step"] == ["float64", "bool", "bool"]
        assert got["render"] == [[680, 680, 3], "uint8"]  # videos: gym-pusht's render() size
        assert got["action_space"] == [[0.0, 0.0], [512.0, 512.0], "float64"]


def test_success_is_gym_pushts_coverage_above_095_from_reset_to_state():
    result = pusht_check("success")
    on, near, off = result["on_goal"], result["near_goal"], result["off_goal"]
    assert on["block_pose"] == pytest.approx([256.0, 256.0, 0.785398])  # exactly the goal pose
    assert on["coverage"] == pytest.approx(1.0) and on["success"] and on["is_success"] and on["terminated"]
    assert on["reward"] == 1.0
    assert 0.95 < near["coverage"] < 1.0 and near["success"] and near["terminated"]  # 1 unit off still counts
    assert 0.85 < off["coverage"] < 0.95 and not off["success"] and not off["terminated"]  # 4 units off does not
    assert off["reward"] == pytest.approx(off["coverage"] / 0.95)
    for case in (on, near, off):  # gym-pusht's own verdict on the same state
        assert case["gym_pusht"] == [case["coverage"], case["success"], case["terminated"], case["reward"]]


def test_a_seed_is_the_same_episode_in_another_process_and_after_other_episodes():
    first = pusht_check("initial_states", "0", "1", "7")
    second = pusht_check("initial_states", "7", "0", "1")
    assert first == second
    assert first["0"] != first["1"] != first["7"]
    assert first["0"][:2] == [390.0, 304.0]  # gym-pusht's reset(seed=0): integer disc position


def test_the_stay_action_holds_the_disc_where_a_zero_target_drags_it_away():
    # what a live episode on a measured clock executes before its first chunk (arena.live)
    moved = pusht_check("stay")
    assert moved["stay"] < 0.5 and moved["zeros"] > 20, moved
