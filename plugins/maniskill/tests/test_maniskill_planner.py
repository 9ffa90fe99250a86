"""ManiSkill's motion-planning experts: the replay against the planner's own env, the
reference table (seeds 0-9), the ``maniskill_motion_planner`` policy's config checks and an
``arena run`` of it.

What needs ManiSkill runs ``planner_checks.py`` under the ``maniskill`` venv's interpreter
(``arena venv setup maniskill``) and asserts on the JSON it prints; the config checks run in
arena's own interpreter, which has no ManiSkill.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.testing.plugin_tests import listed_plugin
from arena.testing.venvs import run_in_venv
from arena_maniskill.expert import MotionPlannerConfig, MotionPlannerExpert
from arena_maniskill.planner import EXPERT_STEPS, Plan, check_config

CHECKS = Path(__file__).with_name("planner_checks.py")


def planner_check(*args: str) -> dict:
    return run_in_venv("maniskill", str(CHECKS), *args)


# -- in arena's own interpreter -------------------------------------------------------------


def _plan(actions: np.ndarray) -> Plan:
    return Plan("PickCube-v1", 3, actions.astype(np.float32), np.arange(8, dtype=np.float32), np.zeros(5, np.float32), True)


def test_a_plan_replays_its_actions_then_holds_the_last_one():
    actions = np.arange(24, dtype=np.float32).reshape(3, 8)
    plan = _plan(actions)
    assert [plan.action(t)[0] for t in range(5)] == [0, 8, 16, 16, 16]
    empty = _plan(np.zeros((0, 8)))
    assert np.array_equal(empty.action(0), np.arange(8))  # a solver that failed at once: the hold action


def test_a_replay_from_another_start_state_is_refused():
    plan = _plan(np.zeros((1, 8)))
    plan.check_start(np.zeros(5))
    with pytest.raises(RuntimeError, match="PickCube-v1 seed 3 .* cannot be replayed faithfully"):
        plan.check_start(np.array([0, 0, 1e-6, 0, 0]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("PushT-v1", "pd_joint_pos"), "PushT-v1 has no ManiSkill motion-planning solution"),
        (("PickCube-v1", "pd_ee_delta_pose"), "set environment.control_mode: pd_joint_pos"),
        (("PickCube-v1", "pd_joint_pos", "physx_cuda"), "set environment.sim_backend: cpu"),
        (("PickCube-v1", "pd_joint_pos", "cpu", "xarm6_robotiq"), "drive the Panda"),
    ],
)
def test_configs_the_replay_cannot_drive_exactly_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        check_config(*args)
    check_config("PickCube-v1", "pd_joint_pos", "cpu", "panda_wristcam")


def test_the_expert_returns_the_planned_rows_and_needs_them():
    expert = MotionPlannerExpert(MotionPlannerConfig())
    planned = np.arange(16, dtype=np.float32).reshape(2, 8)
    action = expert.get_action(None, {"privileged": {"motion_plan_action": planned}})
    assert action.dtype == np.float32 and np.array_equal(action, planned)
    with pytest.raises(ConfigError, match="privileged: \\[motion_plan\\]"):
        expert.get_action(None, {"policy": {}})


def _run(environment: dict, rollout: dict | None = None) -> dict:
    return {
        "runs": {
            "expert": {
                "environment": {"type": "maniskill", "task": "PickCube-v1", "obs_mode": "state", **environment},
                "policy": {"type": "maniskill_motion_planner"},
                "rollout_limit": {"num_episodes": 2, **({"max_episode_steps": 120} if rollout is None else rollout)},
            }
        }
    }


@pytest.mark.parametrize(
    ("environment", "rollout", "message"),
    [
        ({"control_mode": "pd_ee_delta_pose", "privileged": ["motion_plan"]}, None, "set environment.control_mode: pd_joint_pos"),
        ({}, None, "add 'motion_plan' to environment.privileged"),
        ({"privileged": ["motion_plan"]}, {}, f"up to {EXPERT_STEPS['PickCube-v1']} steps on PickCube-v1 .* limit is 50"),
        ({"privileged": ["motion_plan"], "sim_backend": "physx_cuda"}, None, "set environment.sim_backend: cpu"),
    ],
)
def test_validation_names_the_run_and_the_key_to_fix(environment, rollout, message):
    with pytest.raises(ConfigError, match=message) as caught:
        load_experiment_dict(_run(environment, rollout), source="exp.yaml")
    assert caught.value.run == "expert" and caught.value.key == "policy"


def test_a_valid_expert_run_validates_without_maniskill():
    run = load_experiment_dict(_run({"privileged": ["motion_plan"]}), source="exp.yaml").runs["expert"]
    assert run.policy_type == "maniskill_motion_planner"


# -- under the maniskill venv ---------------------------------------------------------------


@pytest.mark.slow
def test_the_replay_reaches_the_planners_states_bit_for_bit():
    """Every state of the evaluated env (another ManiSkill env, with observations) equals the
    planner twin's after the same action; the same seed plans the same actions; a start the
    twin did not have is refused."""
    result = planner_check("replay", "PickCube-v1", "0", "1", "8")
    for seed, row in result["seeds"].items():
        assert row["max_state_diff"] == 0.0, seed
        assert row["planner_success"] and row["replay_success"], seed
        assert row["dtype"] == "float32" and row["width"] == 8
    assert result["seeds"]["8"]["first_success"] == 1  # seed 8's cube starts at the goal
    assert result["deterministic"] and result["mismatch_refused"]
    # Why both envs reset with a fresh scene: without one, the same seed and actions drift.
    assert result["drift_without_reconfigure"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("task", ["PickCube-v1"])  # PullCube: test_maniskill_end_to_end, through arena run
def test_the_reference_table_is_reproduced_on_seeds_0_to_9(task):
    """``reference/lerobot-maniskill.md``: PickCube and PullCube 10/10 on seeds 0-9, both as
    ManiSkill's runner counts (success at the solver's last step) and replayed (any step)."""
    result = planner_check("table", task, "10")
    assert result["planner_success"] == 10 and result["replay_success"] == 10, result
    assert result["max_steps"] == EXPERT_STEPS[task], result["steps"]


@pytest.mark.slow
def test_the_environment_hands_the_plan_to_the_expert():
    result = planner_check("environment", "PickCube-v1", "2")
    episode = {"same_actions": True, "success": True, "max_state_diff": 0.0}
    assert result["episodes"] == {
        "0": {**episode, "steps": 70},
        "1": {**episode, "steps": 71},
        "0 again": {**episode, "steps": 70},
    }
    assert result["privileged_keys"] == ["motion_plan_action", "motion_plan_ok"]
    assert result["action_shape"] == [[1, 8], "float32"]
    assert "set environment.control_mode: pd_joint_pos" in result["wrong_controller"]


def test_the_plugin_lists_the_expert_and_the_droid_adapter():
    registered = listed_plugin("maniskill", timeout=120)["registered"]
    assert "maniskill_motion_planner" in registered["policies"]
    assert "openpi/maniskill_droid" in registered["embodiment_adapters"]


def test_the_expert_refuses_other_environments():
    experiment = {"runs": {"kitchen": {"environment": {"type": "franka_kitchen", "task": "microwave"},
                                       "policy": {"type": "maniskill_motion_planner"}}}}
    with pytest.raises(ConfigError, match="drives the 'maniskill' environment only"):
        load_experiment_dict(experiment, source="exp.yaml")
