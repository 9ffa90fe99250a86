"""``Environment``: the vectorized simulator interface every rollout drives.

Observations use the Arena layout, so adapters move between simulators::

    {"camera_obs": {name: uint8 (num_envs, H, W, 3)},
     "policy":     {name: float (num_envs, D)},
     ...}                      # simulators may add keys, e.g. "task": list[str] of num_envs

The environment never resets by itself: the rollout calls ``reset_envs`` with the seeds of
the episodes it hands out, so totals never depend on which env finished first.

**Success signal.** Every environment class declares how it reports success with the class
attribute ``success_key``: the name of the ``info`` key that ``step`` fills with ``bool
(num_envs,)`` (``"success"`` for the built-ins, ``"is_success"`` for gym-aloha), or ``None``
when the simulator has no success signal at all. A class that declares nothing is refused
when the experiment is validated (exit 2); a declared key missing from a step's ``info`` ends
the run ``failed`` with the reason (never a silent 0 %); ``None`` runs, but every episode ends
``failure`` or ``timeout`` and the run carries a warning (:func:`success_warning`) in its
``run_result.json``, ``status.json``, the report and ``arena status``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict

from arena.errors import SuccessSignalError


class EnvironmentConfig(BaseModel):
    """Base of every environment config. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    def task_name(self) -> str | None:
        """The task this config selects, for records and reports."""
        return getattr(self, "task", None)


class Environment:
    """A batch of ``num_envs`` simulator instances of one task.

    Subclasses set ``name``, ``Config`` and ``success_key`` and implement the methods below.
    ``action_space`` is a gymnasium ``Box`` of **one** env's action.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[EnvironmentConfig]] = EnvironmentConfig
    #: Required, no default: the ``info`` key of ``step`` holding per-env success, ``bool
    #: (num_envs,)``, or ``None`` when the simulator has no success signal (see the module
    #: docstring).
    success_key: ClassVar[str | None]

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
        truncated (num_envs,) bool, info`` where ``info[success_key]`` is ``(num_envs,) bool``
        from the benchmark's own success signal (absent when ``success_key`` is ``None``).
        Envs whose episode has ended are stepped too; the rollout ignores them until it
        resets them.
        """
        raise NotImplementedError

    def render(self, env_id: int) -> np.ndarray:
        """Return one ``uint8 (H, W, 3)`` frame of env ``env_id`` (for videos)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release simulator resources. Idempotent."""


_UNDECLARED = object()


def declared_success_key(env: Any) -> str | None:
    """The ``success_key`` an environment (class or instance) declares.

    Raises:
        SuccessSignalError: it declares none (the message says how to declare it).
    """
    key = getattr(env, "success_key", _UNDECLARED)
    if key is _UNDECLARED or not (key is None or (isinstance(key, str) and key)):
        cls = env if isinstance(env, type) else type(env)
        raise SuccessSignalError(
            f"environment class {cls.__module__}.{cls.__qualname__} does not declare how it reports success: "
            "set the class attribute success_key to the `info` key its step() fills with per-env success "
            "(e.g. 'success', or gym-aloha's 'is_success'), or to None if the simulator has no success signal"
        )
    return key


def success_warning(env: Any) -> str | None:
    """The warning a run carries when its environment has no success signal, else ``None``.

    Raises:
        SuccessSignalError: the environment declares no ``success_key``.
    """
    if declared_success_key(env) is not None:
        return None
    name = getattr(env, "name", "") or (env if isinstance(env, type) else type(env)).__name__
    return (
        f"environment '{name}' has no success signal (success_key = None): every episode ends as "
        "failure or timeout, so the success rate does not measure the task"
    )


def read_success(env: Any, info: Any, num_envs: int) -> np.ndarray:
    """``bool (num_envs,)``: per-env success from a step's ``info`` under ``env.success_key``.

    All false when the environment declares ``success_key = None``.

    Raises:
        SuccessSignalError: the declared key is missing from ``info``, or its value does not
            hold one entry per env.
    """
    key = declared_success_key(env)
    if key is None:
        return np.zeros(num_envs, dtype=bool)
    if not isinstance(info, dict) or key not in info:
        got = sorted(map(str, info)) if isinstance(info, dict) else type(info).__name__
        raise SuccessSignalError(
            f"the environment's step() info has no '{key}' (its declared success_key); info keys: {got}"
        )
    value = np.asarray(info[key]).reshape(-1)
    if value.shape != (num_envs,):
        raise SuccessSignalError(
            f"info['{key}'] has {value.size} value(s); expected one per env ({num_envs})"
        )
    return value.astype(bool)
