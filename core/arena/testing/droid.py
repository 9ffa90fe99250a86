"""A tiny DROID-layout environment for adapter and client tests: the ``franka_kitchen``
observation layout (three cameras, 7 joints, gripper) with no physics, so tests of DROID
clients (openpi, Cosmos, GR00T, DreamZero, your own) run in milliseconds."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from arena.envs.base import Environment, EnvironmentConfig

__all__ = ["CAMERAS", "DroidFakeEnv", "droid_obs"]

CAMERAS = ("external_camera_rgb", "external_camera_2_rgb", "wrist_camera_rgb")


class DroidFakeEnv(Environment):
    """``num_envs`` fake Frankas: images show the step count, joints follow the actions.

    Episodes never succeed; ``episode_steps`` ends them as a truncation (a timeout), after
    ``short_steps`` for episodes whose seed is in ``short_seeds``.
    """

    name = "droid_fake"
    Config = EnvironmentConfig
    success_key = "success"

    def __init__(self, num_envs: int = 2, *, height: int = 48, width: int = 64, episode_steps: int = 1000, short_seeds=(), short_steps: int = 2) -> None:
        super().__init__(EnvironmentConfig(), num_envs=num_envs, cameras=True)
        self.action_space = gym.spaces.Box(-3.0, 3.0, shape=(8,), dtype=np.float32)
        self.task_description = "open the microwave door"
        self.height, self.width = height, width
        self.episode_steps = episode_steps
        self.short_seeds, self.short_steps = set(short_seeds), short_steps
        self.limit = np.full(num_envs, episode_steps)
        self.joints = np.zeros((num_envs, 7), np.float32)
        self.gripper = np.zeros((num_envs, 1), np.float32)
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.actions: list[np.ndarray] = []

    def _obs(self) -> dict:
        frames = np.zeros((self.num_envs, self.height, self.width, 3), np.uint8)
        frames[..., 0] = (self.t % 256)[:, None, None]
        return {
            "camera_obs": {name: frames.copy() for name in CAMERAS},
            "policy": {"joint_pos": self.joints.copy(), "gripper_pos": self.gripper.copy()},
        }

    def reset_envs(self, env_ids, seeds):
        for e, seed in zip(env_ids, seeds):
            self.joints[e] = np.random.default_rng(seed).uniform(-0.1, 0.1, 7)
            self.gripper[e] = 0.0
            self.t[e] = 0
            self.limit[e] = self.short_steps if seed in self.short_seeds else self.episode_steps
        return self._obs()

    def step(self, actions):
        actions = np.asarray(actions, np.float32)
        assert actions.shape == (self.num_envs, 8), actions.shape
        self.actions.append(actions.copy())
        self.joints[:] = actions[:, :7]
        self.gripper[:] = actions[:, 7:]
        self.t += 1
        n = self.num_envs
        truncated = self.t >= self.limit
        return self._obs(), np.zeros(n), np.zeros(n, bool), truncated, {"success": np.zeros(n, bool)}

    def render(self, env_id):
        return self._obs()["camera_obs"]["external_camera_rgb"][env_id]


def droid_obs(num_envs: int = 2, height: int = 48, width: int = 64) -> dict:
    """A synthetic batched observation in the DROID layout."""
    rng = np.random.default_rng(0)
    return {
        "camera_obs": {name: rng.integers(0, 255, (num_envs, height, width, 3), dtype=np.uint8) for name in CAMERAS},
        "policy": {
            "joint_pos": rng.uniform(-1, 1, (num_envs, 7)).astype(np.float32),
            "gripper_pos": rng.uniform(0, 1, (num_envs, 1)).astype(np.float32),
        },
    }
