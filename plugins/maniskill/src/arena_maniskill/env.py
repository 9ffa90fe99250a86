"""ManiSkill3 (mani-skill 3.0.1, SAPIEN 3.0.3) tasks as an arena environment.

Any registered ManiSkill3 gym id runs; :mod:`arena_maniskill.catalog` knows the step limits,
instructions, partial-credit metrics and assets of the tasks it lists. The task's own scene,
randomization, reward and success (``evaluate()``) are used unchanged; arena drives the
unwrapped ManiSkill env (``gym.make(...).unwrapped``: no time-limit wrapper, arena owns step
limits; no auto-reset).

Backends (``sim_backend``):

- ``cpu``: ManiSkill's CPU backend holds one env per ManiSkill env object ("Cannot set the sim
  backend to 'cpu' and have multiple environments"): this class builds one per env and steps
  them one after another; arena's workers run one env per process
  (``envs_per_worker_for`` -> ``"one"``), stepped in parallel.
- ``physx_cuda``: one ManiSkill env of ``num_envs`` parallel scenes on the GPU, in one worker
  holding all of the run's envs (``"all"``, the Isaac Lab pattern). Untested until measured on
  a GPU node.

Observation (Arena layout; ``N = num_envs``, all converted from ManiSkill's torch tensors
here, in the worker)::

    {"camera_obs": {"<camera>_rgb": uint8 (N, H, W, 3)},   # each of the task's cameras, e.g.
                                                           # base_camera_rgb, hand_camera_rgb
     "policy":     {"qpos": float32 (N, dof), "qvel": float32 (N, dof),   # robot joints (rad, m)
                    "<extra>": float32 (N, D),    # the task's extras by ManiSkill's names, e.g.
                                                  # tcp_pose (N, 7) position (m) + quaternion
                                                  # (w, x, y, z); goal_pos (N, 3); bools as 0/1
                    "state": float32 (N, S)},     # state modes: ManiSkill's obs_mode="state"
                                                  # vector (the same values, flattened in its order)
     "privileged": {...},                         # only with config.privileged (scripted experts)
     "task": list[str] of N instructions}

``camera_obs`` is there with ``obs_mode`` ``rgb`` / ``rgb+state`` (and with ``state`` when the
rollout asks for cameras); ``state`` and the privileged extras (object poses) with ``state`` /
``rgb+state``; the ``rgb`` mode's ``policy`` holds what ManiSkill's rgb mode gives a policy
(joints, ``tcp_pose``, goal), never object poses.

Actions: ``(N, action_dim)`` floats in the units of ``control_mode`` (default ``pd_joint_pos``:
7 absolute Panda joint targets in rad and the gripper target), handed to ManiSkill as float32
(its action space's dtype); ManiSkill clips them to its controller's bounds.

Seeds: ``reset_envs`` with seed ``s`` is ManiSkill's ``reset(seed=s)``, which seeds both of the
task's RNGs (numpy batched RNG and torch, forked) with ``s``. On ``cpu`` the reset also rebuilds
the scene (``options={"reconfigure": True}``, config ``fresh_scene``, default on): a plain
``reset(seed)`` keeps PhysX state of the env's previous episode that ``get_state()`` does not
hold, and the same seed and actions then drift (measured on PickCube: a resting cube moves
3e-4 m in 8 steps, states end 1-3 apart), so an episode would depend on which episodes its env
ran before. From a rebuilt scene, episode ``s`` is the same episode bit for bit in any process,
on any env, whatever ran before, so records do not depend on ``num_envs`` or ``workers``; it
costs ~0.3 s per episode, ~1 s with a camera. On ``physx_cuda`` a partial reset hands ManiSkill the seed of every
env (``options={"env_idx": ...}``); ManiSkill draws the reset envs' scenes in one batch from
torch seeded with the first env's seed, so a run is reproducible for the same ``seed`` and
``num_envs``, but episode ``s`` is not the CPU's scene and depends on ``num_envs``.

Success: ``info["success"]`` of the task's ``evaluate()``; ``terminated`` is ManiSkill's
(success, or failure where a task defines one). Extras of ``info`` with one value per env are
passed on (numpy); the catalog's ``metrics`` become per-episode partial credit.

Expert hook (privileged access, in the worker): :meth:`ManiSkillEnvironment.maniskill_env`
(the ManiSkill env object), :meth:`episode_seed`, :meth:`elapsed_steps` and ``config``
(task, control mode, robot, backend). Providers named in ``config.privileged``
(:data:`arena_maniskill.config.PRIVILEGED_PROVIDERS`) use them to add arrays under
``observation["privileged"]`` — the only channel from the worker to a policy in the rollout's
process; see :meth:`ManiSkillEnvironment.privileged_observation`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, ClassVar, Literal, Protocol

import gymnasium as gym
import numpy as np

from arena.envs.base import Environment
from arena.outputs.fingerprint import PROTOCOL_KEY, package_versions
from arena_maniskill.catalog import download_hint, task_spec
from arena_maniskill.config import PRIVILEGED_PROVIDERS, ManiSkillConfig
from arena_maniskill.venv import VENV

#: Distributions whose versions can change a ManiSkill result (the protocol fingerprint's).
SIMULATOR_PACKAGES = ("mani-skill", "sapien", "mplib", "torch", "numpy")


class PrivilegedProvider(Protocol):
    """What a ``privileged`` entry builds in the worker: ``factory(env) -> provider``.

    ``reset(env_id, seed)`` runs after env ``env_id`` started its episode of seed ``seed``
    (the ManiSkill env is reset; e.g. plan on a second env of the same task and seed);
    ``observe(env_id)`` returns that env's privileged arrays now (after a reset or a step),
    the same keys and shapes every time (e.g. ``{"action": float32 (action_dim,)}``); they are
    stacked into ``observation["privileged"]`` as ``(N, ...)``. An optional ``close()`` runs
    when the environment closes.
    """

    def reset(self, env_id: int, seed: int) -> None: ...

    def observe(self, env_id: int) -> dict[str, np.ndarray]: ...


def _numpy(value: Any) -> np.ndarray:
    """A torch tensor (any device) or array as a numpy array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class ManiSkillEnvironment(Environment):
    """``num_envs`` envs of one ManiSkill3 task (see the module docstring).

    Raises (from the constructor):
        ImportError: ManiSkill is not installed in this interpreter (``arena venv setup
            maniskill`` creates the venv whose interpreter runs the workers).
        FileNotFoundError: the task needs assets that are not under ``asset_dir`` (the
            message names ManiSkill's download command).
        ValueError: ``num_envs < 1``; a gym id ManiSkill does not register; a control mode
            the robot lacks; ``asset_dir`` differs from the one ManiSkill was imported with.
    """

    name: ClassVar[str] = "maniskill"
    Config = ManiSkillConfig
    success_key: ClassVar[str | None] = "success"
    envs_per_worker: ClassVar[str] = "one"
    default_venv = VENV
    simulator_modules = ("mani_skill", "sapien")

    @classmethod
    def envs_per_worker_for(cls, config: ManiSkillConfig) -> Literal["any", "one", "all"]:
        """``"one"`` on the ``cpu`` backend (one ManiSkill env per process, the run's envs over
        workers), ``"all"`` on ``physx_cuda`` (ManiSkill vectorizes them in one worker)."""
        return "all" if config.sim_backend == "physx_cuda" else "one"

    #: Live mode (arena.live): ManiSkill's tasks default to control_freq 20 (sim_freq 100).
    control_hz: ClassVar[float | None] = 20.0

    @classmethod
    def hold_rules_for(cls, config: ManiSkillConfig) -> tuple[str, ...]:
        """Absolute controllers (``pd_joint_pos``, ``pd_ee_pose``, ...) repeat a held target;
        delta and velocity controllers only continue the chunk (no null action is declared: the
        null of an arm delta depends on the robot's gripper controller, which may be absolute)."""
        mode = config.control_mode
        if "delta" in mode or "vel" in mode:
            return ("continue_chunk",)
        return ("continue_chunk", "repeat_last")

    @classmethod
    def episode_metrics_for(cls, config: ManiSkillConfig) -> dict[str, str]:
        """The task's partial-credit metrics (``{info key: reduction}``, from the catalog;
        e.g. PickCube ``{"is_grasped": "max", "is_obj_placed": "max"}``); ``{}`` for tasks
        the catalog does not list."""
        spec = task_spec(config.task)
        return dict(spec.metrics) if spec else {}

    @classmethod
    def episode_metric_bounds_for(cls, config: ManiSkillConfig) -> dict[str, tuple[float, float]]:
        """``(0, 1)`` for each of the task's boolean extras (the catalog's ``is_*`` metrics, e.g.
        PickCube's ``is_grasped``), so their intervals stay inside it; distances and angles
        have no upper bound and keep Student's t."""
        spec = task_spec(config.task)
        return {key: (0.0, 1.0) for key in (spec.metrics if spec else {}) if key.startswith("is_")}

    @classmethod
    def venv_checks(cls, python: Any) -> list[Any]:
        """``arena doctor``'s checks in the venv (``python``): Vulkan rendering through SAPIEN
        (:func:`arena_maniskill.doctor.vulkan_check`)."""
        from arena_maniskill.doctor import vulkan_check

        return [vulkan_check(python)]

    def __init__(self, config: ManiSkillConfig, *, num_envs: int, cameras: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        super().__init__(config, num_envs=num_envs, cameras=config.wants_cameras(cameras))
        self._envs: list[Any] = []
        self._closed = False
        #: Each episode starts from a rebuilt scene (cpu backend, ``fresh_scene``; module docstring).
        self.fresh_scene_resets = bool(config.fresh_scene) and config.sim_backend == "cpu"
        self.task_description = config.task_instruction()
        spec = task_spec(config.task)
        self._prepare_assets(config, spec.assets if spec else ())
        try:
            import mani_skill.envs  # noqa: F401  (registers the tasks)
            import torch
            from mani_skill.utils.registration import REGISTERED_ENVS
        except ModuleNotFoundError as exc:
            raise ImportError(
                f"the maniskill environment needs ManiSkill3, which is not installed in {sys.executable} "
                f"(missing module '{exc.name}'): run `arena venv setup maniskill` once, so that its envs run in "
                "workers under that venv, or point environment.python at an interpreter with mani-skill==3.0.1"
            ) from exc
        self._torch = torch
        if config.task not in REGISTERED_ENVS:
            raise ValueError(f"ManiSkill {_version()} registers no task {config.task!r}")
        self._registered_steps = REGISTERED_ENVS[config.task].max_episode_steps
        self.default_max_episode_steps = int(config.max_episode_steps() or self._registered_steps or 500)

        gpu = config.sim_backend == "physx_cuda"
        kwargs: dict[str, Any] = {
            "obs_mode": config.maniskill_obs_mode(cameras),
            "control_mode": config.control_mode,
            "sim_backend": config.sim_backend,
            "render_mode": "rgb_array",
            # SAPIEN renders on the GPU where torch sees one, else on the CPU (lavapipe), without
            # ManiSkill's "sapien_cuda not found, falling back" warning in every worker's log.
            "render_backend": "gpu" if torch.cuda.is_available() else "cpu",
            "sensor_configs": {"width": config.image_width, "height": config.image_height},
            "human_render_camera_configs": {"width": config.image_width, "height": config.image_height},
        }
        if config.robot:
            kwargs["robot_uids"] = config.robot
        # cpu: one ManiSkill env per arena env; physx_cuda: one of num_envs parallel scenes.
        self._slices = [list(range(num_envs))] if gpu else [[e] for e in range(num_envs)]
        try:
            self._envs = [gym.make(config.task, num_envs=len(ids), **kwargs).unwrapped for ids in self._slices]
        except Exception as exc:
            raise ValueError(f"ManiSkill could not build {config.task} ({_describe(kwargs)}): {exc}") from exc
        first = self._envs[0]
        self.action_space = gym.spaces.Box(
            np.asarray(first.single_action_space.low, np.float32),
            np.asarray(first.single_action_space.high, np.float32),
            dtype=np.float32,
        )
        self._action_dim = int(np.prod(self.action_space.shape))
        self._seeds = np.zeros(num_envs, np.int64)
        self._obs: list[dict[str, Any]] = [{} for _ in self._envs]
        self._providers: list[PrivilegedProvider] = [self._provider(name) for name in config.privileged]
        self.reset_envs(list(range(num_envs)), [0] * num_envs)

    # -- privileged access (scripted experts) ------------------------------------------------

    def maniskill_env(self, env_id: int) -> Any:
        """The ManiSkill env object (``mani_skill.envs.sapien_env.BaseEnv``, unwrapped) holding
        env ``env_id``: its own on ``cpu`` (``num_envs == 1``), the batched one on
        ``physx_cuda`` (index ``env_id``). For providers in the worker; never crosses processes."""
        return self._envs[self._where(env_id)[0]]

    def episode_seed(self, env_id: int) -> int:
        """The seed of env ``env_id``'s current episode."""
        return int(self._seeds[self._check(env_id)])

    def elapsed_steps(self, env_id: int) -> int:
        """Steps env ``env_id``'s current episode has taken (ManiSkill's ``elapsed_steps``)."""
        b, i = self._where(env_id)
        return int(_numpy(self._envs[b].elapsed_steps).reshape(-1)[i])

    def privileged_observation(self) -> dict[str, np.ndarray]:
        """``observation["privileged"]``: every provider's ``observe(env_id)`` stacked to
        ``(N, ...)`` (keys as the providers name them); ``{}`` without providers."""
        out: dict[str, np.ndarray] = {}
        for provider in self._providers:
            rows = [provider.observe(e) for e in range(self.num_envs)]
            for key in rows[0]:
                out[key] = np.stack([np.asarray(row[key]) for row in rows])
        return out

    def _provider(self, name: str) -> PrivilegedProvider:
        module, _, attr = PRIVILEGED_PROVIDERS[name].partition(":")
        return getattr(importlib.import_module(module), attr)(self)

    # -- Environment API ---------------------------------------------------------------------

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Start episodes of seed ``seeds[k]`` on ``env_ids[k]`` (ManiSkill ``reset(seed=...)``,
        see the module docstring); return the full batched observation.

        Raises:
            ValueError: as :meth:`~arena.envs.base.Environment.check_reset`.
        """
        env_ids, seeds = self.check_reset(env_ids, seeds)
        for e, s in zip(env_ids, seeds):
            self._seeds[e] = s
        by_env = {b: [self._where(e)[1] for e in env_ids if self._where(e)[0] == b] for b in range(len(self._envs))}
        for b, local in by_env.items():
            if not local:
                continue
            env = self._envs[b]
            if len(self._slices[b]) == 1:
                fresh = {"options": {"reconfigure": True}} if self.fresh_scene_resets else {}
                obs, _ = env.reset(seed=int(self._seeds[self._slices[b][0]]), **fresh)
            else:
                seeds_b = [int(self._seeds[e]) for e in self._slices[b]]
                index = self._torch.tensor(sorted(set(local)), device=env.device)
                obs, _ = env.reset(seed=seeds_b, options={"env_idx": index})
            self._obs[b] = obs
        for provider in self._providers:
            for e, s in zip(env_ids, seeds):
                provider.reset(e, s)
        return self._observation()

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(N, action_dim)`` actions of ``control_mode`` (float32 to ManiSkill).

        Returns the observation, ManiSkill's reward ``(N,)`` float32, ``terminated (N,)`` bool
        (ManiSkill's: success or failure), ``truncated`` (all false: arena owns step limits)
        and ``info``: ``success (N,)`` bool and the task's other per-env ``info`` values
        (``is_grasped``, ``elapsed_steps``, ...) as numpy.

        Raises:
            ValueError: actions of the wrong shape, or not finite.
        """
        actions = self.check_actions(actions, self._action_dim, np.float32)
        rewards, terminated, infos = [], [], []
        for b, env in enumerate(self._envs):
            ids = self._slices[b]
            action = self._torch.from_numpy(actions[ids]).to(env.device)
            obs, reward, term, _trunc, info = env.step(action)
            self._obs[b] = obs
            rewards.append(_numpy(reward).reshape(-1).astype(np.float32))
            terminated.append(_numpy(term).reshape(-1).astype(bool))
            infos.append(info)
        info = self._join_info(infos)
        return self._observation(), np.concatenate(rewards), np.concatenate(terminated), np.zeros(self.num_envs, bool), info

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The protocol fingerprint (the record's own ``seed`` is the one ManiSkill got)."""
        self._check(env_id)
        return {PROTOCOL_KEY: self.protocol()}

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        task, ManiSkill's and the simulators' versions, the seeding (ManiSkill ``reset(seed)``;
        on ``physx_cuda`` batched), robot, controller, observation mode, backend, cameras and
        their size, step limit (no settle steps)."""
        versions = package_versions(SIMULATOR_PACKAGES)
        env = self._envs[0]
        gpu = self.config.sim_backend == "physx_cuda"
        return {
            "benchmark": "maniskill",
            "suite": self.config.task,
            "suite_version": versions["mani-skill"],
            "simulators": versions,
            "init_states": {"source": "ManiSkill _initialize_episode, reset(seed)" + (" batched over num_envs" if gpu else "")},
            "seeding": "maniskill reset(seed=seed + i)" + (f", physx_cuda, num_envs={self.num_envs}" if gpu else ""),
            "robot": str(getattr(env, "robot_uids", self.config.robot)),
            "control_mode": self.config.control_mode,
            "obs_mode": self.config.maniskill_obs_mode(self.cameras and self.config.obs_mode == "state"),
            "sim_backend": self.config.sim_backend,
            "cameras": sorted(self._cameras()),
            "image_size": [self.config.image_height, self.config.image_width] if self._cameras() else None,
            "settle_steps": 0,
            "step_limit": self.default_max_episode_steps,
        }

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (H, W, 3)``: env ``env_id``'s first camera as observed, else ManiSkill's
        human-render camera (``render()``, at the configured image size)."""
        b, i = self._where(env_id)
        sensors = self._obs[b].get("sensor_data") if isinstance(self._obs[b], dict) else None
        if sensors:
            camera = sorted(sensors)[0]
            return np.ascontiguousarray(_numpy(sensors[camera]["rgb"])[i]).astype(np.uint8)
        frame = _numpy(self._envs[b].render())
        return np.ascontiguousarray(frame.reshape(-1, *frame.shape[-3:])[i]).astype(np.uint8)

    def close(self) -> None:
        """Close the ManiSkill envs (idempotent)."""
        if self.__dict__.get("_closed", True):
            return
        self._closed = True
        for provider in self.__dict__.get("_providers", []):
            close = getattr(provider, "close", None)  # optional: e.g. the planner's second env
            if close is not None:
                try:
                    close()
                except Exception:
                    pass
        for env in self._envs:
            try:
                env.close()
            except Exception:
                pass
        self._envs = []

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:
            pass

    # -- helpers -----------------------------------------------------------------------------

    @staticmethod
    def _prepare_assets(config: ManiSkillConfig, assets: tuple[str, ...]) -> None:
        """Point ManiSkill at ``asset_dir`` (``MS_ASSET_DIR``, read when ManiSkill is imported)
        and refuse a task whose downloaded assets are missing there, naming the command."""
        if config.asset_dir:
            if "mani_skill" in sys.modules:
                from mani_skill import ASSET_DIR

                if os.path.realpath(ASSET_DIR) != os.path.realpath(os.path.join(config.asset_dir, "data")):
                    raise ValueError(
                        f"environment.asset_dir is {config.asset_dir}, but ManiSkill was already imported in this "
                        f"process with {ASSET_DIR}; run the envs in workers (environment.workers >= 1)"
                    )
            os.environ["MS_ASSET_DIR"] = config.asset_dir
        if not assets:
            return
        try:
            from mani_skill import ASSET_DIR
            from mani_skill.utils.assets.data import DATA_SOURCES
        except ModuleNotFoundError:
            return  # the constructor's import check says what is missing
        missing = []
        for asset in assets:
            source = DATA_SOURCES.get(asset)
            target = (source.output_dir / source.target_path) if source is not None else None
            if target is None or not target.exists():
                missing.append(asset)
        if missing:
            raise FileNotFoundError(
                f"ManiSkill task {config.task} needs the assets {', '.join(missing)}, which are not in {ASSET_DIR}: "
                f"download them once (network) with `{download_hint(missing, config.asset_dir)}`, "
                "or set environment.asset_dir to the directory that holds them"
            )

    def _check(self, env_id: int) -> int:
        env_id = int(env_id)
        if not 0 <= env_id < self.num_envs:
            raise ValueError(f"env id {env_id} out of range 0..{self.num_envs - 1}")
        return env_id

    def _where(self, env_id: int) -> tuple[int, int]:
        """(index of the ManiSkill env holding ``env_id``, its index in that env's batch)."""
        env_id = self._check(env_id)
        return (0, env_id) if len(self._slices) == 1 else (env_id, 0)

    def _cameras(self) -> list[str]:
        sensors = self._obs[0].get("sensor_data") if self._obs and isinstance(self._obs[0], dict) else None
        return [f"{name}_rgb" for name in sensors or {} if "rgb" in sensors[name]]

    def _observe(self, obs: dict[str, Any]) -> dict[str, Any]:
        """One ManiSkill env's observation (a dict of torch tensors) in the Arena layout."""
        out: dict[str, Any] = {}
        sensors = obs.get("sensor_data") or {}
        if sensors:
            out["camera_obs"] = {f"{name}_rgb": _numpy(data["rgb"]).astype(np.uint8) for name, data in sensors.items() if "rgb" in data}
        policy: dict[str, np.ndarray] = {}
        flat: list[np.ndarray] = []
        for group in ("agent", "extra"):
            for key, value in (obs.get(group) or {}).items():
                if isinstance(value, dict):
                    continue
                array = _numpy(value)
                array = array.reshape(array.shape[0], -1).astype(np.float32)
                policy[key] = array
                flat.append(array)
        if "state" in self.config.maniskill_obs_mode(self.cameras and self.config.obs_mode == "state") and flat:
            policy["state"] = np.concatenate(flat, axis=1)
        out["policy"] = policy
        return out

    def _observation(self) -> dict[str, Any]:
        parts = [self._observe(obs) for obs in self._obs]
        out: dict[str, Any] = {}
        for section in ("camera_obs", "policy"):
            if section in parts[0]:
                out[section] = {k: np.concatenate([p[section][k] for p in parts]) for k in parts[0][section]}
        if self._providers:
            out["privileged"] = self.privileged_observation()
        out["task"] = [self.task_description] * self.num_envs
        return out

    def _join_info(self, infos: list[dict[str, Any]]) -> dict[str, Any]:
        """Per-env values of the ManiSkill envs' ``info`` as numpy ``(N, ...)`` (others dropped)."""
        out: dict[str, Any] = {}
        for key in infos[0]:
            values = [infos[b].get(key) for b in range(len(infos))]
            if not all(hasattr(v, "shape") for v in values):
                continue
            arrays = [_numpy(v) for v in values]
            if any(a.ndim == 0 or a.shape[0] != len(self._slices[b]) for b, a in enumerate(arrays)):
                continue
            out[key] = np.concatenate(arrays)
        if "success" in out:  # a task without one fails the run by name (arena.envs.base.read_success)
            out["success"] = out["success"].astype(bool)
        return out


def _version() -> str:
    return package_versions(["mani-skill"])["mani-skill"] or "(not installed)"


def _describe(kwargs: dict[str, Any]) -> str:
    keys = ("obs_mode", "control_mode", "sim_backend", "robot_uids")
    return ", ".join(f"{k}={kwargs[k]}" for k in keys if k in kwargs)
