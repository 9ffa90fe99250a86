"""``isaaclab``: Isaac Lab (and IsaacLab-Arena) tasks as arena's vectorized ``Environment``.

This class is what arena registers and validates on any interpreter; it imports no Isaac Lab.
Building it starts the simulator (:class:`arena_isaaclab.sim.env.IsaacLabSim`), which needs
the Python 3.12 venv that ``arena venv setup isaaclab`` creates: arena runs the class there, in one
environment worker holding all of the run's envs (``envs_per_worker = "all"``: Isaac Lab
vectorizes itself), under that venv's interpreter (``default_venv``) unless
``environment.python`` names another.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import numpy as np

from arena.envs.base import Environment
from arena_isaaclab.config import IsaacLabConfig
from arena_isaaclab.sim.process import IsaacLabSetupError
from arena_isaaclab.venv import VENV


class IsaacLabEnvironment(Environment):
    """``num_envs`` envs of one Isaac Lab task (observation layout: the task's groups, e.g.
    ``policy`` ``{name: float32 (N, D)}``, ``camera_obs`` ``{name: uint8 (N, H, W, 3)}``, plus
    ``task`` ``list[str]``; actions ``float32 (N, action_dim)``).

    Raises (from the constructor):
        IsaacLabSetupError: Isaac Lab is not importable here (run ``arena isaaclab setup``), or
            the task cannot be built as configured (the message says why).
    """

    name = "isaaclab"
    Config = IsaacLabConfig
    envs_per_worker = "all"
    default_venv = VENV
    simulator_modules = ("isaaclab",)
    #: ``info`` key of per-env success: the task's ``success_term`` (all false when it is null).
    success_key = "success"

    def __init__(self, config: IsaacLabConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        # find_spec, not import: Isaac Lab must not be imported before the asset root is set
        if importlib.util.find_spec("isaaclab") is None:
            raise IsaacLabSetupError(
                f"Isaac Lab is not installed for {sys.executable} (Python {sys.version.split()[0]}). "
                "Run `arena isaaclab setup` to create its Python 3.12 venv (runs then use it), or "
                "set environment.python to an interpreter that has Isaac Lab"
            )
        from arena_isaaclab.sim.env import IsaacLabSim

        self._sim = IsaacLabSim(config, num_envs)
        self.action_space = self._sim.action_space
        self.task_description = self._sim.task_description
        self.default_max_episode_steps = self._sim.default_max_episode_steps

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        env_ids, seeds = self.check_reset(env_ids, seeds)
        return self._sim.reset_envs(env_ids, seeds)

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        return self._sim.step(actions)

    def render(self, env_id: int) -> np.ndarray:
        return self._sim.render(env_id)

    def episode_info(self, env_id: int) -> dict[str, Any]:
        return self._sim.episode_info(env_id)

    def protocol(self) -> dict[str, Any]:
        return self._sim.protocol()

    def close(self) -> None:
        sim = self.__dict__.pop("_sim", None)
        if sim is not None:
            sim.close()
