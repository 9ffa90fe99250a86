"""Checks that need ManiSkill, run by the tests under the ``maniskill`` venv's interpreter.

``python planner_checks.py CHECK [ARGS...]`` prints one JSON object on its last line (the tests
assert on it); the suite's own interpreter has no ManiSkill (numpy < 2, its own torch).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def _evaluated_env(task: str, obs_mode: str = "state_dict") -> object:
    """The env a replay is checked on: built as the ``maniskill`` environment builds it
    (unwrapped, ``pd_joint_pos``, CPU), with observations, unlike the planner's twin."""
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401

    return gym.make(task, obs_mode=obs_mode, control_mode="pd_joint_pos", sim_backend="cpu").unwrapped


def replay(task: str, *seeds: str) -> dict:
    """Plan each seed (keeping the twin's states), replay on a separate evaluated env, compare
    every state; plan the first seed again (determinism); show the drift a reset without a
    fresh scene has."""
    import torch

    from arena_maniskill.planner import MotionPlanner, _flat_state

    planner = MotionPlanner(task)
    env = _evaluated_env(task)
    out: dict = {"seeds": {}}
    planned = {}
    for seed in map(int, seeds):
        plan = planner.plan(seed, keep_states=True)
        planned[seed] = plan.actions
        env.reset(seed=seed, options={"reconfigure": True})
        plan.check_start(_flat_state(env))
        worst, first_success, success = 0.0, None, False
        for t, action in enumerate(plan.actions):
            _, _, _, _, info = env.step(torch.from_numpy(action.copy()))
            worst = max(worst, float(np.max(np.abs(_flat_state(env) - plan.states[t]))))
            success = bool(info["success"].reshape(-1)[0])
            if success and first_success is None:
                first_success = t + 1
        out["seeds"][seed] = {
            "steps": plan.steps,
            "planner_success": plan.success,
            "replay_success": success,
            "first_success": first_success,
            "max_state_diff": worst,
            "dtype": str(plan.actions.dtype),
            "width": int(plan.actions.shape[1]),
        }
    # The first seed again, after the others ran on the twin: the same plan.
    first = planner.plan(int(seeds[0]), keep_states=True)
    out["deterministic"] = bool(np.array_equal(first.actions, planned[int(seeds[0])]))
    # A start the twin did not have is refused (seed + 1's scene against seed's plan).
    # Without a fresh scene, the same seed and actions drift (PhysX keeps state of the previous
    # episode that get_state() does not hold): what the provider's reconfiguring reset avoids.
    drift = 0.0
    for options in ({"reconfigure": True}, None):
        env.reset(seed=int(seeds[0]), options=options)
        for t, action in enumerate(first.actions):
            env.step(torch.from_numpy(action.copy()))
            drift = max(drift, float(np.max(np.abs(_flat_state(env) - first.states[t]))))
    out["drift_without_reconfigure"] = drift
    env.reset(seed=int(seeds[0]) + 1)
    try:
        first.check_start(_flat_state(env))
        out["mismatch_refused"] = False
    except RuntimeError as exc:
        out["mismatch_refused"] = "cannot be replayed faithfully" in str(exc)
    planner.close()
    env.close()
    return out


def table(task: str, count: str = "10") -> dict:
    """Seeds 0..count-1: the planner's success at its last step (ManiSkill's runner) and the
    replay's success at any step (arena's, the episode ends at success), with lengths."""
    import torch

    from arena_maniskill.planner import MotionPlanner

    planner = MotionPlanner(task)
    env = _evaluated_env(task, "none")
    planned, replayed, steps, started = 0, 0, [], time.perf_counter()
    for seed in range(int(count)):
        plan = planner.plan(seed)
        env.reset(seed=seed, options={"reconfigure": True})
        hit = False
        for action in plan.actions:
            _, _, _, _, info = env.step(torch.from_numpy(action.copy()))
            if bool(info["success"].reshape(-1)[0]):
                hit = True
                break
        planned += plan.success
        replayed += hit
        steps.append(plan.steps)
    return {
        "task": task,
        "planner_success": planned,
        "replay_success": replayed,
        "max_steps": max(steps),
        "steps": steps,
        "seconds": round(time.perf_counter() - started, 1),
    }


def environment(task: str, count: str = "3") -> dict:
    """The ``maniskill`` environment with ``privileged: [motion_plan]`` (the provider runs in
    this process, as in a worker) driven by ``maniskill_motion_planner``: the actions it hands
    the env are the plan's, its states the twin's, and episodes succeed; a wrong controller is
    refused."""
    from arena_maniskill.config import ManiSkillConfig
    from arena_maniskill.env import ManiSkillEnvironment
    from arena_maniskill.expert import MotionPlannerConfig, MotionPlannerExpert
    from arena_maniskill.planner import MotionPlanner, _flat_state

    config = ManiSkillConfig(task=task, obs_mode="state", privileged=["motion_plan"])
    env = ManiSkillEnvironment(config, num_envs=1)
    expert = MotionPlannerExpert(MotionPlannerConfig())
    reference = MotionPlanner(task)
    out: dict = {"episodes": {}}
    for seed in [*range(int(count)), 0]:  # seed 0 again, after other episodes: the same episode
        obs = env.reset_envs([0], [seed])
        plan = reference.plan(seed, keep_states=True)
        same, success, steps, worst = True, False, 0, 0.0
        for t in range(plan.steps + 5):
            action = expert.get_action(env, obs)
            same &= bool(np.array_equal(action[0], plan.action(t)))
            obs, _, _, _, info = env.step(action)
            if t < plan.steps:
                worst = max(worst, float(np.max(np.abs(_flat_state(env.maniskill_env(0)) - plan.states[t]))))
            steps += 1
            if info["success"][0]:
                success = True
                break
        out["episodes"][str(seed) if str(seed) not in out["episodes"] else f"{seed} again"] = {
            "same_actions": same, "success": success, "steps": steps, "max_state_diff": worst}
    out["privileged_keys"] = sorted(obs["privileged"])
    out["action_shape"] = [list(obs["privileged"]["motion_plan_action"].shape), str(obs["privileged"]["motion_plan_action"].dtype)]
    env.close()
    try:
        ManiSkillEnvironment(ManiSkillConfig(task=task, obs_mode="state", control_mode="pd_ee_delta_pose", privileged=["motion_plan"]), num_envs=1)
        out["wrong_controller"] = None
    except ValueError as exc:
        out["wrong_controller"] = str(exc)
    return out


CHECKS = {"replay": replay, "table": table, "environment": environment}

if __name__ == "__main__":
    result = CHECKS[sys.argv[1]](*sys.argv[2:])
    print(json.dumps(result))
