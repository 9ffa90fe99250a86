"""``maniskill_motion_planner``: ManiSkill's own motion-planning experts as an arena policy.

Privileged, like the LIBERO expert (``plugins/libero``): the policy runs in the rollout's
process, the simulator in the env workers (the ``maniskill`` venv), and the only channel
between them is the observation. So the planning happens in the worker, next to the
evaluated env: ``environment.privileged: [motion_plan]`` makes the ``maniskill`` environment
build :class:`arena_maniskill.planner.MotionPlanProvider`, which at every episode start runs
ManiSkill's solution for the task and seed on a twin env, records the actions it applies and
puts the one for the current step under ``observation["privileged"]["motion_plan_action"]``
(``float32 (N, 8)``); this policy returns those rows. Why a twin and a replay, and how the
replay is checked, is in :mod:`arena_maniskill.planner`.

Config checks (``arena validate``, exit 2 naming the file, the run and the key): the
environment is ``maniskill`` with ``privileged`` listing ``motion_plan``; its task has a
solution; ``control_mode`` is ``pd_joint_pos`` (the solutions emit absolute joint targets;
under another controller the same numbers would mean something else, so it is refused, not
converted); ``sim_backend`` is ``cpu``; the robot is a Panda; and the run's step limit is at
least what the solver took on seeds 0-9 (:data:`arena_maniskill.planner.EXPERT_STEPS`: the
tasks' registered limits are shorter, e.g. PickCube 50 against up to 88).

Example (``rollout_limit.max_episode_steps`` above the solver's length)::

    environment: {type: maniskill, task: PickCube-v1, control_mode: pd_joint_pos,
                  privileged: [motion_plan], workers: 2}
    policy: {type: maniskill_motion_planner}
    rollout_limit: {num_episodes: 10, max_episode_steps: 120}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.errors import ConfigError
from arena.policies.base import PolicyBase, PolicyConfig
from arena_maniskill.planner import ACTION_KEY, EXPERT_STEPS, PROVIDER, check_config


class MotionPlannerConfig(PolicyConfig):
    """``maniskill_motion_planner`` has no options (the solutions take none)."""

    def validate_run(self, run: Any) -> None:
        """Refuse runs the replay cannot drive exactly (module docstring); ``ValueError``
        becomes the loader's ConfigError keyed ``policy``, the message names the key to fix."""
        from arena_maniskill.config import ManiSkillConfig

        env = run.environment
        if not isinstance(env, ManiSkillConfig):
            raise ValueError(f"maniskill_motion_planner drives the 'maniskill' environment only, not {run.environment_type!r}")
        if PROVIDER not in env.privileged:
            raise ValueError(
                f"maniskill_motion_planner reads the plan the env worker computes: add {PROVIDER!r} to "
                f"environment.privileged (e.g. privileged: [{PROVIDER}])"
            )
        check_config(env.task, env.control_mode, env.sim_backend, env.robot)
        limit = run.rollout_limit.max_episode_steps or env.max_episode_steps()
        need = EXPERT_STEPS.get(env.task)
        if need is not None and limit is not None and limit < need:
            raise ValueError(
                f"the motion planner takes up to {need} steps on {env.task} (seeds 0-9), but the run's step limit is "
                f"{limit}: set rollout_limit.max_episode_steps to at least {need}"
            )


class MotionPlannerExpert(PolicyBase[MotionPlannerConfig]):
    """Returns the planned action of each env (``observation["privileged"]["motion_plan_action"]``).

    ``get_action`` returns ``float32 (num_envs, 8)``: ``pd_joint_pos`` actions (7 absolute
    Panda joint targets in rad, gripper +1 open ... -1 closed), exactly the values the solver
    applied to the twin env.

    Raises:
        arena.errors.ConfigError: the observation has no planned actions (the environment was
            built without ``privileged: [motion_plan]``, e.g. a config that skipped validation).
    """

    name = "maniskill_motion_planner"
    Config = MotionPlannerConfig

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        privileged = observation.get("privileged") or {}
        if ACTION_KEY not in privileged:
            raise ConfigError(
                f"maniskill_motion_planner needs observation['privileged'][{ACTION_KEY!r}]: run the maniskill "
                f"environment with privileged: [{PROVIDER}]"
            )
        return np.asarray(privileged[ACTION_KEY], np.float32)
