"""The simulator side of the ``isaaclab`` environment: a ``ManagerBasedRLEnv`` behind arena's contract.

Built in the environment worker (Python 3.12, torch, Isaac Lab); nothing here is imported on
the arena side. What it does to Isaac Lab's env (the README says the same to users):

- **No auto-reset inside** ``step``. Isaac Lab's ``step`` resets every env whose termination
  terms fire. The env's termination manager is wrapped (:class:`_Terminations`) so its terms
  are still computed where Isaac Lab computes them (reward terms that read them keep working)
  but report nothing done to ``step``; arena reads the terms after each step: the success term
  gives ``info["success"]``, the failure terms ``terminated``. Time-out terms are ignored:
  arena's ``rollout_limit.max_episode_steps`` ends episodes (its default is the task's own
  ``episode_length_s`` in steps). Only :meth:`IsaacLabSim.reset_envs` resets.
- **Seeds**: Isaac Lab's random state is global (torch, numpy, ``random``, Warp). Each env of a
  ``reset_envs`` call is reset alone, in the order given (the rollout gives episodes in seed
  order), right after seeding with its episode's seed, so everything drawn at reset depends on
  that seed only. Draws made during steps (observation noise, interval events, command
  resampling) and at construction (start-up events) come from the shared stream and are not
  per episode; :func:`seeding_mode` names which case a task is in, and every record carries it.
- **Observations** in arena's layout: each observation group a dict of numpy arrays (copied
  out of Isaac Lab's torch / Warp buffers), ``task`` the task description per env.
- **Actions**: ``float32 (N, action_dim)`` numpy, moved to the env's device.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import numpy as np

from arena_isaaclab.config import IsaacLabConfig
from arena_isaaclab.sim import process

#: ``env_extras.seeding`` values (README "Seeds").
EPISODE = "episode"
EPISODE_RESET = "episode_reset"



#: Distributions whose versions can change an Isaac Lab result (the protocol fingerprint's).
SIMULATOR_PACKAGES = ("isaaclab", "isaaclab_arena", "newton", "warp-lang", "mujoco", "mujoco-warp", "torch")

class _Terminations:
    """Wraps Isaac Lab's ``TerminationManager``: terms are computed as usual, ``step`` sees none done."""

    def __init__(self, manager: Any) -> None:
        import torch

        self._manager = manager
        self._none = torch.zeros_like(manager.dones)

    def compute(self) -> Any:
        self._manager.compute()
        return self._none

    @property
    def dones(self) -> Any:
        return self._none

    @property
    def terminated(self) -> Any:
        return self._none

    @property
    def time_outs(self) -> Any:
        return self._none

    def __getattr__(self, name: str) -> Any:
        return getattr(self._manager, name)

    def __str__(self) -> str:
        return str(self._manager)


def to_numpy(value: Any) -> Any:
    """A copy of a torch tensor or Warp array as numpy (recursively through dicts); other values as given."""
    if isinstance(value, dict):
        return {k: to_numpy(v) for k, v in value.items()}
    if hasattr(value, "detach"):  # torch.Tensor
        return np.array(value.detach().cpu().numpy(), copy=True)
    if hasattr(value, "numpy") and hasattr(value, "device"):  # warp.array
        return np.array(value.numpy(), copy=True)
    return value


def seeding_mode(cfg: Any) -> tuple[str, list[str]]:
    """``(mode, shared)``: :data:`EPISODE` when nothing is drawn outside resets, else
    :data:`EPISODE_RESET` and what draws from the shared stream (``shared``)."""
    shared: list[str] = []
    for name, group in _fields(getattr(cfg, "observations", None)):
        if getattr(group, "enable_corruption", False) and any(
            getattr(term, "noise", None) is not None for _, term in _fields(group)
        ):
            shared.append(f"observation noise ({name})")
    for name, term in _fields(getattr(cfg, "events", None)):
        mode = getattr(term, "mode", None)
        if mode == "interval":
            shared.append(f"interval event {name}")
        elif mode in ("startup", "prestartup"):
            shared.append(f"start-up event {name} (drawn once, at construction)")
    for name, term in _fields(getattr(cfg, "commands", None)):
        if getattr(term, "resampling_time_range", None) is not None:
            shared.append(f"command {name} (resampled during episodes)")
    return (EPISODE_RESET if shared else EPISODE), shared


def _fields(cfg: Any) -> list[tuple[str, Any]]:
    """The set attributes of a config object (none for ``None``)."""
    return [(k, v) for k, v in getattr(cfg, "__dict__", {}).items() if v is not None]


class IsaacLabSim:
    """``num_envs`` envs of one Isaac Lab task in this process (see the module docstring).

    Raises (from the constructor):
        IsaacLabSetupError: the task, config class or IsaacLab-Arena environment cannot be
            resolved, a term named in ``success_term`` / ``failure_terms`` does not exist, or
            Isaac Lab was imported before the asset root could be set.
    """

    def __init__(self, config: IsaacLabConfig, num_envs: int) -> None:
        from arena_isaaclab.sim.tasks import owns_assets

        self.config = config
        self.num_envs = num_envs
        self._owned_assets: str | None = None
        asset_root = config.asset_root
        if asset_root is None and owns_assets(config):
            from arena_isaaclab.sim.assets import write_asset_root

            self._owned_assets = tempfile.mkdtemp(prefix="arena-isaaclab-assets-")
            asset_root = str(write_asset_root(self._owned_assets))
        process.prepare(asset_root, config.kernel_cache_dir)

        import torch

        from arena_isaaclab.sim import build

        self.torch = torch
        self.device = config.device or build.default_device()
        resolved = build.resolve(config, num_envs, self.device)
        self.removed_cameras = build.adjust(resolved.cfg, config, num_envs, self.device)
        self.seeding, self.shared_draws = seeding_mode(resolved.cfg)
        self.source = resolved.source
        self.env, self._launcher = build.make(resolved, self.device)
        try:
            self._setup(resolved.cfg)
        except BaseException:
            self.close()
            raise

    def _setup(self, cfg: Any) -> None:
        import gymnasium as gym

        env = self.env
        manager = env.termination_manager
        terms = list(manager.active_terms)
        time_outs = {n for n in terms if manager.get_term_cfg(n).time_out}
        config = self.config
        if config.success_term is not None and config.success_term not in terms:
            raise process.IsaacLabSetupError(
                f"success_term {config.success_term!r} is not a termination term of {self.source} "
                f"(its terms: {', '.join(terms) or 'none'}); set success_term to one of them, or null"
            )
        if config.failure_terms is None:
            failures = [n for n in terms if n != config.success_term and n not in time_outs]
        else:
            unknown = [n for n in config.failure_terms if n not in terms]
            if unknown:
                raise process.IsaacLabSetupError(
                    f"failure_terms {unknown} are not termination terms of {self.source} "
                    f"(its terms: {', '.join(terms) or 'none'})"
                )
            failures = list(config.failure_terms)
        self.success_term = config.success_term
        self.failure_terms = failures
        env.termination_manager = _Terminations(manager)

        space = env.single_action_space
        low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape)
        bounds = getattr(cfg, "action_bounds", None)
        if bounds is not None:
            low, high = (np.asarray(b, np.float32).reshape(space.shape) for b in bounds)
        self.action_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.action_dim = int(np.prod(space.shape))
        self.task_description = (
            config.task_description or getattr(cfg, "task_description", None) or self.source
        )
        self.default_max_episode_steps = int(env.max_episode_length)
        self._obs: dict[str, Any] = {}

    # -- arena's contract -----------------------------------------------------------------------
    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Reset each env alone, seeded with its episode's seed, in the order given."""
        obs = None
        for env_id, seed in zip(env_ids, seeds):
            ids = self.torch.tensor([int(env_id)], device=self.device, dtype=self.torch.long)
            obs, _ = self.env.reset(env_ids=ids, seed=int(seed))
        if obs is not None:
            self._obs = self._observation(obs)
        return self._obs

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.float32)
        if actions.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"actions must be float32 ({self.num_envs}, {self.action_dim}), got {actions.shape}")
        obs, reward, _terminated, _truncated, _extras = self.env.step(self.torch.as_tensor(actions, device=self.device))
        manager = self.env.termination_manager
        n = self.num_envs
        success = to_numpy(manager.get_term(self.success_term)).astype(bool) if self.success_term else np.zeros(n, bool)
        failed = np.zeros(n, bool)
        for name in self.failure_terms:
            failed |= to_numpy(manager.get_term(name)).astype(bool)
        self._obs = self._observation(obs)
        reward = to_numpy(reward).astype(np.float64).reshape(n)
        return self._obs, reward, failed, np.zeros(n, bool), {"success": success}

    def render(self, env_id: int) -> np.ndarray:
        """The first camera's (by name) latest frame of ``env_id``, ``uint8 (H, W, 3)``."""
        cameras = self._obs.get("camera_obs") or {}
        for name in sorted(cameras):
            frame = cameras[name][env_id]
            if frame.ndim == 3 and frame.shape[-1] == 3:
                return frame
        raise RuntimeError(
            f"{self.source} has no RGB camera observation (group camera_obs) to render; "
            "turn cameras on or record a named camera"
        )

    def episode_info(self, env_id: int) -> dict[str, Any]:
        from arena.outputs.fingerprint import PROTOCOL_KEY

        info: dict[str, Any] = {"seeding": self.seeding}
        if self.shared_draws:
            info["shared_draws"] = list(self.shared_draws)
        info[PROTOCOL_KEY] = self.protocol()
        return info

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        the task (gym id, env_cfg or IsaacLab-Arena environment), the simulator packages'
        versions, the physics backend and device, the control period (``sim.dt`` seconds times
        ``decimation``), the success and failure terms, cameras and their size, the seeding
        mode and the build seed, and the step limit. Computed once per run."""
        if getattr(self, "_protocol", None) is None:
            from arena.outputs.fingerprint import package_versions

            cfg = getattr(self.env, "cfg", None)
            sim = getattr(cfg, "sim", None)
            cameras = {
                name: list(np.asarray(frames).shape[1:3])
                for name, frames in (self._obs.get("camera_obs") or {}).items()
            }
            self._protocol = {
                "benchmark": "isaaclab",
                "suite": self.source,
                "simulators": package_versions(SIMULATOR_PACKAGES),
                "physics": self.config.physics,
                "device": str(self.device),
                "sim_dt_s": getattr(sim, "dt", None),
                "decimation": getattr(cfg, "decimation", None),
                "success_term": self.success_term,
                "failure_terms": list(self.failure_terms),
                "cameras": cameras or None,
                "seeding": self.seeding,
                "build_seed": self.config.build_seed,
                "step_limit": self.default_max_episode_steps,
            }
        return self._protocol

    def close(self) -> None:
        env, self.env = getattr(self, "env", None), None
        if env is not None:
            env.close()
        launcher, self._launcher = getattr(self, "_launcher", None), None
        if launcher is not None:
            launcher.__exit__(None, None, None)
        if self._owned_assets is not None:
            shutil.rmtree(self._owned_assets, ignore_errors=True)
            self._owned_assets = None

    # -- helpers -------------------------------------------------------------------------------
    def _observation(self, obs: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for group, value in obs.items():
            value = to_numpy(value)
            out[group] = value if isinstance(value, dict) else {group: value}
        out["task"] = [self.task_description] * self.num_envs
        return out
