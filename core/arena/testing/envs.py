"""Small pure-numpy environments for tests of arena and of plugins (no simulator, no extras).

- :class:`ToyReachEnv`: a point moves in the unit square towards a target; a camera shows
  both. Every episode is fixed by its seed, so results can be compared across ``num_envs``,
  ``workers`` and interpreters. ``experiment type: arena.testing.envs:ToyReachEnv``.
- :class:`CrashingToyEnv`: the same, told to crash its process (exit, segfault, SIGKILL), to
  hang or to raise at a given step of the episodes of given seeds — for crash-isolation tests of
  environment workers. In-process it takes the whole rollout down, which is the point. It
  accepts an ``object_mass`` perturbation that changes nothing but whether it crashes (or can
  be built at all): a perturbation sweep with a level that breaks the simulator.

Both import only numpy, gymnasium and arena-core, so they also run in a worker under another
interpreter whose venv holds arena-core without the simulator extras.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field

from arena.envs.base import Environment, EnvironmentConfig
from arena.envs.perturbations import MUJOCO

__all__ = ["CrashingToyConfig", "CrashingToyEnv", "ToyReachConfig", "ToyReachEnv"]


class ToyReachConfig(EnvironmentConfig):
    """Options of the toy reaching task."""

    task: str = Field("toy-reach", description="task name for records")
    image_size: int = Field(16, ge=4, le=512, description="side of the square camera image, pixels")
    cameras: bool = Field(True, description="render camera_obs['top'] every step")
    speed: float = Field(0.1, gt=0, description="distance moved per step at action 1.0")
    success_radius: float = Field(0.08, gt=0, description="distance to the target that counts as success")
    step_delay_s: float = Field(0.0, ge=0, description="seconds every step of every env sleeps (a slow simulator)")
    max_steps: int = Field(40, ge=1, description="default_max_episode_steps")
    report_distance: bool = Field(
        False, description="declare info['distance'] an episode metric (its minimum over the episode)"
    )
    report_bounded: bool = Field(
        False,
        description="declare two bounded episode metrics: info['near'] (bool: within twice success_radius; max) and "
        "info['progress'] (the fraction of the start distance closed, in [0, 1]; max)",
    )
    nan_reward_seeds: list[int] = Field(
        default_factory=list, description="episode seeds whose reward is NaN at step nan_reward_step (a physics blow-up)"
    )
    nan_reward_step: int = Field(2, ge=1, description="the step of such an episode whose reward is NaN")
    close_delay_s: float = Field(0.0, ge=0, description="seconds close() takes (a simulator slow to shut down)")


class ToyReachEnv(Environment):
    """``num_envs`` points reaching targets; observation (``N = num_envs``, ``S = image_size``)::

        {"camera_obs": {"top": uint8 (N, S, S, 3)},       # point red, target green
         "policy": {"position": float32 (N, 2), "target": float32 (N, 2)},
         "task": list[str] of N}

    Actions ``float32 (N, 2)`` in ``[-1, 1]``: the point moves ``speed * action`` (clipped to
    the square). Success: within ``success_radius`` of the target. Reward: minus the distance.
    Episode seed ``s`` draws the start and the target with ``numpy.random.default_rng(s)``.
    ``info["distance"]`` ``float64 (N,)`` is the distance after the step; with
    ``report_distance`` it is an episode metric reduced by ``min`` (the closest approach).
    With ``report_bounded``: ``info["near"]`` ``bool (N,)`` (within twice the success radius)
    and ``info["progress"]`` ``float64 (N,)`` in ``[0, 1]`` (the fraction of the start distance
    closed), both metrics reduced by ``max`` and declared bounded by ``[0, 1]``. Episodes whose
    seed is in ``nan_reward_seeds`` get a NaN reward at step ``nan_reward_step``.
    """

    name = "toy_reach"
    Config = ToyReachConfig
    success_key = "success"

    @classmethod
    def episode_metrics_for(cls, config: ToyReachConfig) -> dict[str, str]:
        metrics = {"distance": "min"} if config.report_distance else {}
        if config.report_bounded:
            metrics.update(near="max", progress="max")
        return metrics

    @classmethod
    def episode_metric_bounds_for(cls, config: ToyReachConfig) -> dict[str, tuple[float, float]]:
        return {"near": (0.0, 1.0), "progress": (0.0, 1.0)} if config.report_bounded else {}

    def __init__(self, config: ToyReachConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=bool(cameras or config.cameras))
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.task_description = "move the red point onto the green target"
        self.default_max_episode_steps = config.max_steps
        self.position = np.zeros((num_envs, 2), np.float32)
        self.target = np.full((num_envs, 2), 0.5, np.float32)
        self.seed = np.full(num_envs, -1, np.int64)
        self.steps = np.zeros(num_envs, np.int64)
        self.start_distance = np.zeros(num_envs, np.float64)

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        env_ids, seeds = self.check_reset(env_ids, seeds)
        for e, seed in zip(env_ids, seeds):
            rng = np.random.default_rng(seed)
            self.position[e] = rng.uniform(0.0, 1.0, 2)
            self.target[e] = rng.uniform(0.0, 1.0, 2)
            self.seed[e] = seed
            self.steps[e] = 0
            self.start_distance[e] = float(np.linalg.norm(self.target[e] - self.position[e]))
        return self._observation()

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions, np.float32)
        if actions.shape != (self.num_envs, 2):
            raise ValueError(f"actions must have shape ({self.num_envs}, 2), got {actions.shape}")
        if self.config.step_delay_s:
            time.sleep(self.config.step_delay_s)
        self.steps += 1
        self.before_step()
        self.position = np.clip(self.position + self.config.speed * np.clip(actions, -1, 1), 0.0, 1.0).astype(np.float32)
        distance = np.linalg.norm(self.target - self.position, axis=1)
        success = distance <= self.config.success_radius
        none = np.zeros(self.num_envs, bool)
        reward = -distance.astype(np.float64)
        for e in range(self.num_envs):
            if int(self.seed[e]) in self.config.nan_reward_seeds and int(self.steps[e]) == self.config.nan_reward_step:
                reward[e] = np.nan
        info = {"success": success, "distance": distance.astype(np.float64)}
        if self.config.report_bounded:
            info["near"] = distance <= 2 * self.config.success_radius
            start = np.maximum(self.start_distance, 1e-9)
            info["progress"] = np.clip(1.0 - distance / start, 0.0, 1.0)
        return self._observation(), reward, none, none.copy(), info

    def before_step(self) -> None:
        """Called in every step after the step counters advanced (a hook for subclasses)."""

    def close(self) -> None:
        if self.config.close_delay_s:
            time.sleep(self.config.close_delay_s)

    def render(self, env_id: int) -> np.ndarray:
        size = self.config.image_size
        frame = np.zeros((size, size, 3), np.uint8)
        frame[..., 2] = 40
        for point, channel in ((self.target[env_id], 1), (self.position[env_id], 0)):
            row, col = (np.clip(point, 0, 1) * (size - 1)).round().astype(int)
            frame[max(0, row - 1) : row + 2, max(0, col - 1) : col + 2, channel] = 255
        return frame

    def episode_info(self, env_id: int) -> dict[str, Any]:
        return {"start_distance": round(float(self.start_distance[env_id]), 6)}

    def _observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "policy": {"position": self.position.copy(), "target": self.target.copy()},
            "task": [self.config.task] * self.num_envs,
        }
        if self.cameras:
            obs["camera_obs"] = {"top": np.stack([self.render(e) for e in range(self.num_envs)])}
        return obs


class CrashingToyConfig(ToyReachConfig):
    """:class:`ToyReachConfig` plus when and how to crash."""

    crash_seeds: list[int] = Field(default_factory=list, description="episode seeds whose episodes crash")
    crash_step: int = Field(2, ge=1, description="the step of such an episode that crashes")
    crash_mode: Literal["exit", "segfault", "kill", "raise", "hang"] = Field(
        "segfault",
        description="exit: os._exit(3); segfault: a real SIGSEGV; kill: SIGKILL itself; raise: RuntimeError; "
        "hang: sleep for an hour (a deadlocked simulator)",
    )
    crash_from_object_mass: float | None = Field(
        None, description="crash only in runs whose object_mass perturbation is at least this (a simulator "
        "unstable with heavy objects); null: whatever the perturbations",
    )
    unbuildable_from_object_mass: float | None = Field(
        None, description="building the environment raises in runs whose object_mass perturbation is at least this",
    )


class CrashingToyEnv(ToyReachEnv):
    """:class:`ToyReachEnv` whose episodes with a seed in ``crash_seeds`` crash the process at
    ``crash_step`` (see :class:`CrashingToyConfig`). It prints a line first, as a dying
    simulator might."""

    name = "crashing_toy"
    Config = CrashingToyConfig
    #: object_mass only decides whether it crashes (see :class:`CrashingToyConfig`); the point moves as ever
    perturbations = (MUJOCO["object_mass"],)

    def __init__(self, config: CrashingToyConfig, *, num_envs: int, cameras: bool = False) -> None:
        if _at_least(_object_mass(config), config.unbuildable_from_object_mass):
            raise RuntimeError(f"toy simulator: cannot build a scene with object_mass {_object_mass(config):g}")
        super().__init__(config, num_envs=num_envs, cameras=cameras)

    def before_step(self) -> None:
        config: CrashingToyConfig = self.config  # type: ignore[assignment]
        if config.crash_from_object_mass is not None and not _at_least(_object_mass(config), config.crash_from_object_mass):
            return
        for e in range(self.num_envs):
            if int(self.seed[e]) in config.crash_seeds and int(self.steps[e]) == config.crash_step:
                print(f"toy simulator: episode seed {int(self.seed[e])} crashes ({config.crash_mode})", flush=True)
                _crash(config.crash_mode)


def _object_mass(config: EnvironmentConfig) -> float:
    return float((config.perturbations or {}).get("object_mass", MUJOCO["object_mass"].nominal))


def _at_least(value: float, threshold: float | None) -> bool:
    return threshold is not None and value >= threshold


def _crash(mode: str) -> None:
    if mode == "hang":
        time.sleep(3600)
    if mode == "raise":
        raise RuntimeError("toy simulator failed")
    if mode == "exit":
        os._exit(3)
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    import ctypes

    ctypes.string_at(0)  # SIGSEGV
