"""``Environment``: the vectorized simulator interface every rollout drives.

Observations use the Arena layout, so adapters move between simulators::

    {"camera_obs": {name: uint8 (num_envs, H, W, 3)},
     "policy":     {name: float (num_envs, D)},
     ...}                      # simulators may add keys, e.g. "task": list[str] of num_envs

The environment never resets by itself: the rollout calls ``reset_envs`` with the seeds of
the episodes it hands out, so totals never depend on which env finished first.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict


class EnvironmentConfig(BaseModel):
    """Base of every environment config. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    def task_name(self) -> str | None:
        """The task this config selects, for records and reports."""
        return getattr(self, "task", None)


class Environment:
    """A batch of ``num_envs`` simulator instances of one task.

    Subclasses set ``name`` and ``Config`` and implement the methods below.
    ``action_space`` is a gymnasium ``Box`` of **one** env's action.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[EnvironmentConfig]] = EnvironmentConfig

    def __init__(self, config: EnvironmentConfig, *, num_envs: int, cameras: bool = False) -> None:
        """``cameras`` asks for ``camera_obs`` (rendering costs tens of ms per frame on a CPU)."""
        self.config = config
        self.num_envs = num_envs
        self.cameras = cameras

    action_space: gym.spaces.Box
    task_description: str
    #: Steps after which an episode is a timeout when the experiment sets no
    #: ``rollout_limit.max_episode_steps``.
    default_max_episode_steps: int = 500

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Reset ``env_ids`` with episode seeds ``seeds``; return the full batched observation."""
        raise NotImplementedError

    def check_reset(self, env_ids: list[int], seeds: list[int]) -> tuple[list[int], list[int]]:
        """``reset_envs``' arguments as ints, checked: one seed per env id, ids in range.

        Raises:
            ValueError: the lengths differ or an env id is outside ``0..num_envs - 1``.
        """
        env_ids = [int(e) for e in env_ids]
        seeds = [int(s) for s in seeds]
        if len(env_ids) != len(seeds):
            raise ValueError(f"{len(env_ids)} env_ids but {len(seeds)} seeds")
        for e in env_ids:
            if not 0 <= e < self.num_envs:
                raise ValueError(f"env id {e} out of range 0..{self.num_envs - 1}")
        return env_ids, seeds

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``float32 (num_envs, action_dim)`` actions.

        Returns ``observation, reward (num_envs,) float, terminated (num_envs,) bool,
        truncated (num_envs,) bool, info`` where ``info["success"]`` is ``(num_envs,) bool``
        from the benchmark's own success signal. Envs whose episode has ended are stepped too;
        the rollout ignores them until it resets them.
        """
        raise NotImplementedError

    def render(self, env_id: int) -> np.ndarray:
        """Return one ``uint8 (H, W, 3)`` frame of env ``env_id`` (for videos)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release simulator resources. Idempotent."""
