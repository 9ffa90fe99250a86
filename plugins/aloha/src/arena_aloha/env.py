"""ALOHA sim (gym-aloha 0.1.5: two ViperX 300s arms, MuJoCo through dm_control) as an arena env.

The benchmark's own scenes, tasks, seeding and staged reward are used unchanged; only its
per-step rendering is left out. gym-aloha's ``step`` renders three 640 x 480 cameras whatever
the policy needs (~135 ms on a CPU, against 0.4 ms of physics), so this environment drives
the same dm_control task with an observation that renders nothing, and renders the cameras
of ``config.cameras`` itself, with the call gym-aloha uses (``physics.render`` of the scene
camera), after each step.

Observation (Arena layout, the one the openpi ``aloha`` adapter reads; ``N = num_envs``)::

    {"camera_obs": {"cam_high_rgb": uint8 (N, H, W, 3),    # the scene's "top" camera
                    ...},                                  # each camera of config.cameras
     "policy":     {"joint_pos":   float64 (N, 14),   # gym-aloha's agent_pos, see below
                    "object_pose": float64 (N, 7 * k)},  # k objects: position (m), quaternion (w, x, y, z)
     "task":       list[str] of N task names}

``joint_pos`` per arm, left arm first: 6 joint angles (rad: waist, shoulder, elbow, forearm
roll, wrist angle, wrist rotate) and the gripper normalized to 0 closed ... 1 open (gym-aloha's
finger-position normalization). ``object_pose`` is the simulator's free-joint state of the cube
(transfer_cube, k = 1) or of the peg then the socket (insertion, k = 2): privileged state for
scripted experts, which policies trained on images ignore. ``H, W`` default to 480 x 640.

Actions: ``(N, 14)`` absolute targets in the same layout as ``joint_pos``, handed to the
simulator as float64 (openpi's ALOHA sim client, ``examples/aloha_sim/env.py`` line 42,
passes the float64 chunk row it received; gym-aloha then computes the gripper targets in
float64 too, where float32 input would round them from step 0). ``action_dtype: float32``
hands them over as float32, as ``lerobot-eval`` 0.6 does (``scripts/lerobot_eval.py`` l.303-307:
the policy's float32 action as numpy, whose rows gymnasium's ``SyncVectorEnv`` passes on
unchanged), so gym-aloha's gripper targets are LeRobot's, for LeRobot-trained policies. gym-aloha
declares ``Box(-1, 1)``, which is wrong; :attr:`AlohaEnvironment.action_space` holds the real
bounds, read from the model's actuators (joint control ranges; the finger range normalized like
the gripper). The simulator clamps targets to them; this class does not clip.

Episodes: ``reset_envs`` with seed ``s`` samples the object pose exactly as gym-aloha's
``reset(seed=s)`` (``np.random.RandomState(s)``), so seed ``s`` is the same episode here and in
gym-aloha. gym-aloha hands that pose to its scene through a module global (``BOX_POSE``), read
during the reset; this class sets it immediately before each env's reset, so envs of one
process reset one after another are safe, while two threads resetting at once would not be.
arena's env workers run one env per worker process.

Success: gym-aloha's staged reward (0-4, from contacts) reaching 4 — the transfer_cube cube
held by the left gripper off the table, the insertion peg touching the pin; gym-aloha reports it
as ``info["is_success"]`` and terminates the episode, and so does this class.
"""

from __future__ import annotations

import collections
import sys
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from arena.envs.serial import SerialEnvironment
from arena.rendering import configure_headless_rendering
from arena.outputs.fingerprint import package_versions
from arena.envs.mujoco_perturb import supported as supported_perturbations
from arena_aloha.config import TASKS, AlohaConfig, scene_camera
from arena_aloha.venv import VENV

configure_headless_rendering()

ACTION_DIM = 14
#: Distributions whose versions can change an ALOHA result (the protocol fingerprint's).
SIMULATOR_PACKAGES = ("gym-aloha", "dm-control", "mujoco", "numpy")
#: Staged reward at which an episode succeeds (gym-aloha's ``max_reward``).
SUCCESS_REWARD = 4
#: The six arm joints of each arm, in action order (the gripper is the seventh value).
_ARM_ACTUATORS = ("waist", "shoulder", "elbow", "forearm_roll", "wrist_angle", "wrist_rotate")


def _make_task(task: str, physics: Any) -> Any:
    """gym-aloha's task ``task`` whose observation renders nothing (a dm_control ``Environment``)."""
    from dm_control.rl import control
    from gym_aloha.constants import DT
    from gym_aloha.tasks import sim

    base = {"transfer_cube": sim.TransferCubeTask, "insertion": sim.InsertionTask}[task]

    class _StateOnly(base):  # type: ignore[misc, valid-type]
        """The benchmark's task; its observation without the three 640 x 480 renders."""

        def get_observation(self, physics: Any) -> collections.OrderedDict:
            return collections.OrderedDict(qpos=self.get_qpos(physics), env_state=self.get_env_state(physics))

    # As gym-aloha builds it: no time limit (arena owns step limits), 50 Hz control.
    return control.Environment(
        physics, _StateOnly(), time_limit=float("inf"), control_timestep=DT, n_sub_steps=None, flat_observation=False
    )


def _object_pose(task: str, seed: int) -> np.ndarray:
    """gym-aloha's initial object pose for ``seed`` (what its ``reset(seed)`` puts in ``BOX_POSE``)."""
    from gym_aloha.utils import sample_box_pose, sample_insertion_pose

    if task == "transfer_cube":
        return np.asarray(sample_box_pose(seed), np.float64)
    return np.concatenate(sample_insertion_pose(seed)).astype(np.float64)


class AlohaEnvironment(SerialEnvironment):
    """``num_envs`` ALOHA sim envs of one task in this process (see the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, bad env ids or seeds, actions of the wrong shape or not
            finite.
        ImportError: gym-aloha is not installed in this interpreter (``arena aloha setup``
            creates the venv whose interpreter runs the workers; or set ``environment.python``).
    """

    name: ClassVar[str] = "aloha"
    Config = AlohaConfig
    #: gym-aloha's own success key: ``info["is_success"]`` is the staged reward reaching 4.
    success_key: ClassVar[str | None] = "is_success"
    #: gym-aloha passes the object pose through a module global: one env per worker process.
    envs_per_worker: ClassVar[str] = "one"
    #: The venv ``arena venv setup aloha`` creates; its interpreter runs the workers.
    default_venv = VENV
    simulator_modules = ("gym_aloha", "dm_control")
    #: gym-aloha's time limit (``max_episode_steps=300`` of both registered envs).
    default_max_episode_steps = 300
    #: Live mode (arena.live): actions are absolute joint targets, so a held target repeats.
    hold_rules: ClassVar[tuple[str, ...]] = ("continue_chunk", "repeat_last")
    #: gym-aloha's control period DT = 0.02 s: 50 control steps per second.
    control_hz: ClassVar[float | None] = 50.0

    @classmethod
    def stay_action_for(cls, config: AlohaConfig, observation: dict[str, Any], env_id: int) -> np.ndarray:
        """The arms' current ``joint_pos`` as their targets (the action layout, grippers
        normalized alike): what a live episode holds before its first chunk arrives, where
        zeros would swing both arms to their zero pose."""
        return np.asarray(observation["policy"]["joint_pos"][env_id], np.float64)
    #: MuJoCo scene perturbations (:mod:`arena.envs.mujoco_perturb`): the scene cameras of
    #: ``config.cameras`` (not the wrist ones), every light, the free objects (the cube; the peg
    #: and the socket). No ``table_color``: the scene's table has no material of its own.
    perturbations = supported_perturbations(
        ("camera_shift", "camera_height", "camera_rotate", "light_intensity", "light_direction",
         "object_offset", "object_mass", "object_friction")
    )

    def __init__(self, config: AlohaConfig, *, num_envs: int, cameras: bool = False) -> None:
        # `cameras=True` asks for images when the config lists none: the benchmark's top camera.
        names = list(config.cameras) or (["cam_high"] if cameras else [])
        super().__init__(config, num_envs=num_envs, cameras=bool(names))
        try:
            from dm_control import mujoco
            from gym_aloha.constants import ASSETS_DIR
            from gym_aloha.tasks import sim
        except ModuleNotFoundError as exc:
            raise ImportError(
                f"the aloha environment needs gym-aloha, which is not installed in {sys.executable} "
                f"(missing module '{exc.name}'): run `arena aloha setup` once, so that its envs run in "
                "workers under that venv, or point environment.python at an interpreter that has gym-aloha==0.1.5"
            ) from exc

        self.task = config.task
        self.task_description = config.task_instruction()
        self._camera_keys = {f"{name}_rgb": scene_camera(name) for name in names}
        self._box_pose = sim.BOX_POSE  # gym-aloha's module global, read by the task's reset
        xml = str(ASSETS_DIR / TASKS[config.task][0])
        self._envs = [_make_task(config.task, mujoco.Physics.from_xml_path(xml)) for _ in range(num_envs)]
        self.action_space = self._real_action_space(self._envs[0].physics)
        h, w = config.image_height, config.image_width
        self._frames = {key: np.zeros((num_envs, h, w, 3), np.uint8) for key in self._camera_keys}
        self._joint_pos = np.zeros((num_envs, ACTION_DIM), np.float64)
        width = 7 if config.task == "transfer_cube" else 14
        self._object_pose = np.zeros((num_envs, width), np.float64)
        self._reward = np.zeros(num_envs, np.float64)
        self._max_reward = np.zeros(num_envs, np.float64)
        self._initial_pose = np.zeros_like(self._object_pose)
        self._perturbers = self._make_perturbers(names)
        self._start_episodes()

    @staticmethod
    def _real_action_space(physics: Any) -> gym.spaces.Box:
        """The 14-dim Box of the scene's actuator ranges (grippers normalized as gym-aloha does)."""
        from gym_aloha.constants import normalize_puppet_gripper_position

        model = physics.model
        low, high = [], []
        for arm in ("left", "right"):
            for joint in _ARM_ACTUATORS:
                lo, hi = _ctrlrange(model, f"vx300s_{arm}/{joint}")
                low.append(lo)
                high.append(hi)
            lo, hi = _ctrlrange(model, f"vx300s_{arm}/left_finger")
            low.append(normalize_puppet_gripper_position(lo))
            high.append(normalize_puppet_gripper_position(hi))
        return gym.spaces.Box(np.asarray(low, np.float32), np.asarray(high, np.float32), dtype=np.float32)

    # -- Environment API ---------------------------------------------------------------------

    def _reset_one(self, e: int, seed: int) -> None:
        """Start env ``e``'s episode of seed ``seed`` as gym-aloha's ``reset(seed)`` does."""
        env = self._envs[e]
        # What gym-aloha's reset(seed) does before resetting the dm_control task.
        env.task.random.seed(seed)
        env.task._random = np.random.RandomState(seed)
        self._box_pose[0] = _object_pose(self.task, seed)
        try:
            time_step = env.reset()
        finally:
            self._box_pose[0] = None
        self._reward[e] = self._max_reward[e] = 0.0
        observation = time_step.observation
        if self.perturb_after_reset(e, seed):  # objects moved: read the scene again
            observation = env.task.get_observation(env.physics)
        self._read(e, observation)
        self._initial_pose[e] = self._object_pose[e]

    # -- perturbations (arena.envs.mujoco_perturb) ----------------------------------------

    def _make_perturbers(self, cameras: list[str]) -> list[Any] | None:
        """One perturber per env's physics, or ``None`` when no simulator perturbation is active."""
        from arena.envs.mujoco_perturb import MujocoPerturber
        from arena.envs.perturbations import simulator_values

        values = simulator_values(self)
        if not values:
            return None
        observed = [c for c in map(scene_camera, cameras) if c not in ("left_wrist", "right_wrist")]
        perturbers = [MujocoPerturber(env.physics.model.ptr, values, cameras=observed) for env in self._envs]
        for perturber in perturbers:  # before any reset: every episode's reset sees the same scene
            perturber.apply_model()
        return perturbers

    def perturb_after_reset(self, env_id: int, seed: int) -> bool:
        """Apply the active simulator perturbations to ``env_id`` after its reset (the model's
        edits, then the cube's / peg's and socket's offset for ``seed``); whether objects moved."""
        if self._perturbers is None:
            return False
        perturber = self._perturbers[env_id]
        perturber.apply_model()
        return perturber.apply_data(self._envs[env_id].physics.data.ptr, seed)

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``(N, 14)`` absolute joint + gripper targets, as float64 (``action_dtype``; module docstring).

        Returns the observation, the staged reward ``(N,)`` float (0-4), ``terminated (N,)``
        (reward 4, as gym-aloha), ``truncated`` (all false: arena owns step limits) and
        ``info`` with ``success`` and gym-aloha's ``is_success``, both ``(N,)`` bool.
        """
        # float64, as openpi's client hands them over (``action_dtype: float32``: as lerobot-eval
        # does): gym-aloha derives the gripper targets from the action in its own dtype, so the
        # dtype changes them.
        actions = self.check_actions(actions, ACTION_DIM, np.dtype(self.config.action_dtype))
        for e, env in enumerate(self._envs):
            time_step = env.step(actions[e])
            self._reward[e] = float(time_step.reward)
            self._max_reward[e] = max(self._max_reward[e], self._reward[e])
            self._read(e, time_step.observation)
        success = self._reward >= SUCCESS_REWARD
        info = {"success": success.copy(), "is_success": success.copy()}
        return self._observation(), self._reward.copy(), success.copy(), np.zeros(self.num_envs, bool), info

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``max_reward``: the highest stage the episode reached (0-4: gym-aloha's staged reward,
        e.g. 2 = cube lifted); ``initial_object_pose``: the seed's object pose (m, quaternion w, x, y, z)."""
        return {
            "max_reward": float(self._max_reward[env_id]),
            "initial_object_pose": [round(float(v), 6) for v in self._initial_pose[env_id]],
            **super().episode_info(env_id),
        }

    def protocol(self) -> dict[str, Any]:
        """The protocol fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        task, gym-aloha's and the simulators' versions, the init-state source (gym-aloha's
        per-seed sampling), cameras and their size, step limit (no settle steps)."""
        versions = package_versions(SIMULATOR_PACKAGES)
        return {
            "benchmark": "aloha",
            "suite": self.task,
            "suite_version": versions["gym-aloha"],
            "simulators": versions,
            "init_states": {"source": "gym-aloha sample_box_pose / sample_insertion_pose(np.random.RandomState(seed))"},
            "seeding": "gym-aloha reset(seed)",
            "cameras": sorted(self._camera_keys),
            "image_size": [self.config.image_height, self.config.image_width] if self._camera_keys else None,
            "settle_steps": 0,
            "step_limit": self.default_max_episode_steps,
        } | ({"action_dtype": "float32"} if self.config.action_dtype == "float32" else {})

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (H, W, 3)`` frame of env ``env_id``'s ``top`` camera (for videos)."""
        env_id = self.check_env_id(env_id)
        for key, camera in self._camera_keys.items():
            if camera == "top":
                return self._frames[key][env_id].copy()
        return self._render(env_id, "top")

    def _release(self) -> None:
        """Free the simulators' physics and rendering contexts."""
        self._close_each(self._envs, lambda env: env.physics.free())
        self._envs = []

    # -- helpers -----------------------------------------------------------------------------

    def _render(self, env_id: int, camera: str) -> np.ndarray:
        physics = self._envs[env_id].physics
        return physics.render(height=self.config.image_height, width=self.config.image_width, camera_id=camera)

    def _read(self, e: int, observation: dict[str, Any]) -> None:
        self._joint_pos[e] = observation["qpos"]
        self._object_pose[e] = observation["env_state"]
        for key, camera in self._camera_keys.items():
            self._frames[key][e] = self._render(e, camera)

    def _observe_one(self, e: int) -> dict[str, Any]:
        obs: dict[str, Any] = {
            "policy": {"joint_pos": self._joint_pos[e], "object_pose": self._object_pose[e]},
            "task": self.task,
        }
        if self._frames:
            obs["camera_obs"] = {key: frames[e] for key, frames in self._frames.items()}
        return obs


def _ctrlrange(model: Any, joint: str) -> tuple[float, float]:
    """Control range of the position actuator driving ``joint`` (the scene names no actuators)."""
    import mujoco

    joint_id = mujoco.mj_name2id(model.ptr, mujoco.mjtObj.mjOBJ_JOINT, joint)
    for a in range(model.nu):
        if int(model.actuator_trnid[a, 0]) == joint_id:
            lo, hi = model.actuator_ctrlrange[a]
            return float(lo), float(hi)
    raise RuntimeError(f"gym-aloha's scene has no actuator for joint {joint!r}")
