"""Gymnasium-Robotics' Franka Kitchen (Franka Panda, MuJoCo, CPU) in the DROID layout.

The benchmark (``gymnasium_robotics`` ``KitchenEnv``, from Relay Policy Learning / D4RL) has
a 9-dim joint-velocity action and two fixed cameras (``left_cap``, ``right_cap``). DROID
policies (openpi's pi0/pi05 DROID joint-position checkpoints, Cosmos, GR00T, DreamZero) see
two exterior cameras and a wrist camera and command absolute joint positions, so this
environment:

- adds a wrist camera to the Panda's hand (``panda0_link7``) and two exterior cameras over
  the robot's shoulders with MuJoCo's model editing API (:class:`mujoco.MjSpec`), compiled
  once per batch (the benchmark's ``left_cap``/``right_cap`` barely see the robot; choose
  them with ``exterior_cameras: benchmark``);
- converts each absolute joint-position action into the benchmark's own joint-velocity
  controller (see "Actions"), so the benchmark's dynamics, limits and task checks are used
  unchanged.

Observation (Arena layout, DROID keys; ``N = num_envs``)::

    {"camera_obs": {"external_camera_rgb":   uint8 (N, H, W, 3),   # over the robot's left shoulder
                    "external_camera_2_rgb": uint8 (N, H, W, 3),   # over the robot's right shoulder
                    "wrist_camera_rgb":      uint8 (N, H, W, 3)},  # on the hand, looking past the fingers
     "policy":     {"joint_pos":   float32 (N, 7),   # Panda arm joints, rad (true, noise-free)
                    "gripper_pos": float32 (N, 1)},  # 0 = open ... 1 = closed
     "task":       list[str] of N task names}

``camera_obs`` is present when ``cameras`` is on (the default: DROID policies need images).
``H, W`` are ``image_height, image_width`` (default 180 x 320, DROID's 16:9 aspect).

Actions: ``float32 (N, 8)`` = 7 absolute arm joint positions (rad) + gripper (0 open ... 1
closed). Each step the target becomes the benchmark's velocity action
``clip((target - q) / dt / 2, -1, 1)`` (``dt`` = 0.08 s, the benchmark maps ``[-1, 1]`` to
``[-2, 2]`` rad/s), so a target within 0.16 rad of the current joint is reached in one step
and a farther one at the benchmark's velocity limit. The gripper value sets both finger
joints to ``(1 - g) * 0.04`` m the same way. Targets outside the joint limits are clipped by
the benchmark.

Success: the benchmark's own task completion (``episode_task_completions`` holds the task:
its joints are within 0.3 of the goal). The benchmark terminates the episode then. Its
horizon, 280 steps, is ``default_max_episode_steps``.

Episodes are fixed by their seed: the seed draws the initial arm joints (the benchmark's
start pose plus uniform noise of ``init_joint_noise`` rad, ``numpy`` Generator seeded with
the episode seed) and seeds the benchmark's reset, so the same seed gives the same episode on
any env of any batch.

Rendering: EGL on a node with an NVIDIA GPU, software OpenGL (OSMesa) otherwise
(:mod:`arena.rendering`). With
``render_quality: fast`` (the default: no shadows, reflections or multisampling) three
cameras cost about 0.1-0.2 s per step on one core, nearly independent of the image size (a
frame's cost is mostly the scene's geometry); physics alone is ~5 ms per step.
``render_quality: full`` is the benchmark's look and many times slower. With cameras, spread
the envs over worker processes (``workers: auto``, :mod:`arena.envs.workers`).

Needs the ``kitchen`` extra: ``pip install 'arena-core[kitchen]'``.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field, field_validator

from arena.envs.base import EnvironmentConfig
from arena.envs.perturbations import MUJOCO
from arena.envs.serial import SerialEnvironment
from arena.extras import import_extra
from arena.outputs.fingerprint import PROTOCOL_KEY, package_versions
from arena.rendering import configure_headless_rendering

configure_headless_rendering()

#: Task name -> (the benchmark's task name, language instruction).
TASKS: dict[str, tuple[str, str]] = {
    "microwave": ("microwave", "open the microwave door"),
    "kettle": ("kettle", "move the kettle to the top left burner"),
    "light_switch": ("light switch", "turn on the light switch"),
    "slide_cabinet": ("slide cabinet", "open the sliding cabinet door"),
    "hinge_cabinet": ("hinge cabinet", "open the left hinged cabinet door"),
    "bottom_burner": ("bottom burner", "turn the knob of the bottom burner"),
    "top_burner": ("top burner", "turn the knob of the top burner"),
}

#: Camera observation key -> MuJoCo camera name, per ``exterior_cameras`` choice.
CAMERA_SETS: dict[str, dict[str, str]] = {
    # Added cameras over the robot's left and right shoulders, like DROID's two exterior ZEDs.
    "droid": {
        "external_camera_rgb": "exterior_left",
        "external_camera_2_rgb": "exterior_right",
        "wrist_camera_rgb": "wrist_cam",
    },
    # The benchmark's own two cameras (placed for the original dataset, not for DROID).
    "benchmark": {
        "external_camera_rgb": "left_cap",
        "external_camera_2_rgb": "right_cap",
        "wrist_camera_rgb": "wrist_cam",
    },
}
#: Added exterior cameras: name -> (position, point looked at), world frame (m). The robot's
#: base is at (0, 0, 1.8) and it faces +y, towards the counter.
_EXTERIOR_CAMERAS = {
    "exterior_left": ((-0.75, -0.55, 2.45), (-0.3, 0.6, 1.75)),
    "exterior_right": ((0.55, -0.6, 2.45), (-0.2, 0.6, 1.75)),
}
_EXTERIOR_FOVY = 60.0

ACTION_DIM = 8
ARM_JOINTS = 7
#: Bounds of one action: the benchmark's arm joint limits (rad, ``franka_config.xml``), gripper 0..1.
ACTION_LOW = np.array([-2.9, -1.8, -2.9, -3.1, -2.9, 0.0, -2.9, 0.0], np.float32)
ACTION_HIGH = np.array([2.9, 1.8, 2.9, 0.0, 2.9, 3.8, 2.9, 1.0], np.float32)
#: Finger joint travel (m) of the benchmark's Panda gripper: 0 closed ... 0.04 open.
FINGER_OPEN_M = 0.04
#: The benchmark's action scale: action 1.0 means this many rad/s (or m/s).
_VELOCITY_PER_ACTION = 2.0
#: Where the wrist camera sits on ``panda0_link7`` (m) and how it is turned (w, x, y, z):
#: behind and beside the fingers, looking along the gripper axis like DROID's wrist ZED mini.
_WRIST_CAMERA_POS = (0.07, -0.07, 0.02)
_WRIST_CAMERA_QUAT = (0.0, 0.9239, 0.3827, 0.0)
_WRIST_CAMERA_FOVY = 75.0


_WHAT = "the franka_kitchen environment"


def _mujoco() -> Any:
    return import_extra("mujoco", "kitchen", _WHAT)


def check_task_name(task: str) -> str:
    """Return the canonical task name (``light switch`` -> ``light_switch``) or raise ``ValueError``."""
    key = task.strip().replace(" ", "_").replace("-", "_")
    if key in TASKS:
        return key
    close = difflib.get_close_matches(key, list(TASKS), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known tasks: {', '.join(TASKS)}"
    raise ValueError(f"unknown Franka Kitchen task {task!r}; {hint}")


class FrankaKitchenConfig(EnvironmentConfig):
    """Options of a Franka Kitchen run (``environment: {type: franka_kitchen, task: ...}``)."""

    task: str = Field(
        description="kitchen task: microwave, kettle, light_switch, slide_cabinet, hinge_cabinet, "
        "bottom_burner or top_burner"
    )
    image_height: int = Field(180, ge=16, le=1080, description="camera image height in pixels")
    image_width: int = Field(320, ge=16, le=1920, description="camera image width in pixels")
    cameras: bool = Field(True, description="render camera_obs every step (DROID policies need them)")
    init_joint_noise: float = Field(
        0.02, ge=0.0, le=0.5, description="rad; uniform noise on the start pose of the 7 arm joints"
    )
    exterior_cameras: Literal["droid", "benchmark"] = Field(
        "droid",
        description="droid: two added cameras over the robot's shoulders; benchmark: the "
        "benchmark's own left_cap and right_cap",
    )
    render_quality: Literal["fast", "full"] = Field(
        "fast",
        description="fast: no shadows, reflections or multisampling (software rendering is "
        "several times faster); full: the benchmark's look",
    )
    instruction: str | None = Field(
        None, description="language instruction sent to the policy (default: the task's own)"
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return check_task_name(value)


def _kitchen_env() -> Any:
    """gymnasium-robotics' ``kitchen_env`` module, imported without its Adroit notice.

    gymnasium-robotics 1.2.1-1.4.2 print, on import, a notice (from ``farama_notifications``)
    that the Adroit hand envs' rewards changed: it concerns no Franka Kitchen run, and every
    env worker printed it once. Only that notice is dropped; others still print.
    """
    import sys

    if "gymnasium_robotics" not in sys.modules:
        try:
            from farama_notifications import notifications
        except ImportError:
            notifications = {}
        notices = notifications.get("gymnasium_robotics")
        if isinstance(notices, dict):
            for version in [v for v, text in notices.items() if "Adroit" in str(text)]:
                del notices[version]
    return import_extra("gymnasium_robotics.envs.franka_kitchen.kitchen_env", "kitchen", _WHAT)


def build_model() -> Any:
    """The benchmark's kitchen model with a ``wrist_cam`` camera on the hand (an ``MjModel``)."""
    import os

    mujoco = _mujoco()
    kitchen_env = _kitchen_env()

    path = os.path.join(
        os.path.dirname(os.path.realpath(kitchen_env.__file__)),
        "../assets/kitchen_franka/kitchen_assets/kitchen_env_model.xml",
    )
    spec = mujoco.MjSpec.from_file(os.path.normpath(path))
    hand = spec.body("panda0_link7")
    if hand is None:
        raise RuntimeError("Franka Kitchen model has no body 'panda0_link7'")
    hand.add_camera(
        name="wrist_cam", pos=list(_WRIST_CAMERA_POS), quat=list(_WRIST_CAMERA_QUAT), fovy=_WRIST_CAMERA_FOVY
    )
    for name, (pos, target) in _EXTERIOR_CAMERAS.items():
        spec.worldbody.add_camera(name=name, pos=list(pos), quat=_look_at(pos, target), fovy=_EXTERIOR_FOVY)
    return spec.compile()


def _look_at(pos: tuple[float, ...], target: tuple[float, ...]) -> list[float]:
    """Quaternion (w, x, y, z) of a MuJoCo camera at ``pos`` looking at ``target``, z up.

    A MuJoCo camera looks along its -z axis with +y up in the image.
    """
    forward = np.asarray(target, float) - np.asarray(pos, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    rot = np.stack([right, up, -forward], axis=1)  # columns: camera x, y, z in world
    quat = np.zeros(4)
    _mujoco().mju_mat2Quat(quat, rot.reshape(-1))
    return quat.tolist()


#: The counter top's material, tinted by ``table_color``.
TABLE_MATERIALS = ("counter_marble",)


class FrankaKitchenEnvironment(SerialEnvironment):
    """``num_envs`` Franka Kitchen envs of one task, in this process (see the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, bad env ids or seeds, or actions of the wrong shape.
    """

    name = "franka_kitchen"
    Config = FrankaKitchenConfig
    success_key = "success"
    default_max_episode_steps = 280
    #: Every MuJoCo scene perturbation (:mod:`arena.envs.mujoco_perturb`): the cameras are the
    #: two exterior ones (the wrist camera stays on the hand), the table the counter's marble
    #: top, the one free object the kettle.
    perturbations = tuple(MUJOCO.values())

    def __init__(self, config: FrankaKitchenConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=bool(cameras or config.cameras))
        mujoco = _mujoco()
        KitchenEnv = _kitchen_env().KitchenEnv

        self.task = config.task
        self._cameras = CAMERA_SETS[config.exterior_cameras]
        benchmark_task, instruction = TASKS[config.task]
        self._benchmark_task = benchmark_task
        self.task_description = config.instruction or instruction
        self.action_space = gym.spaces.Box(ACTION_LOW, ACTION_HIGH, dtype=np.float32)
        self._model = build_model()
        if config.render_quality == "fast":
            self._model.vis.quality.offsamples = 0  # no multisampling
        self._kitchens: list[Any] = []
        for _ in range(num_envs):
            kitchen = KitchenEnv(tasks_to_complete=[benchmark_task])
            # Run the benchmark on the model with the wrist camera (same joints, bodies and
            # actuators; one compiled model shared by the batch, one MjData per env).
            robot = kitchen.robot_env
            robot.model = kitchen.model = self._model
            robot.data = kitchen.data = mujoco.MjData(self._model)
            self._kitchens.append(kitchen)
        self._start_qpos = np.array(self._kitchens[0].robot_env.init_qpos, dtype=np.float64)
        self._dt = float(self._kitchens[0].robot_env.dt)
        self._perturber = self._make_perturber()
        self._renderer = (
            mujoco.Renderer(self._model, config.image_height, config.image_width) if self.cameras else None
        )
        h, w = config.image_height, config.image_width
        self._frames = {k: np.zeros((num_envs, h, w, 3), np.uint8) for k in self._cameras} if self.cameras else None
        self._joint_pos = np.zeros((num_envs, ARM_JOINTS), np.float32)
        self._gripper_pos = np.zeros((num_envs, 1), np.float32)
        self._success = np.zeros(num_envs, bool)
        self._start_episodes()

    # -- Environment API ---------------------------------------------------------------------

    def _reset_one(self, e: int, seed: int) -> None:
        """Seed ``seed`` (an int >= 0) draws the start pose's joint noise and seeds the benchmark's reset."""
        kitchen = self._kitchens[e]
        start = self._start_qpos.copy()
        noise = self.config.init_joint_noise
        if noise > 0:
            start[:ARM_JOINTS] += np.random.default_rng(seed).uniform(-noise, noise, ARM_JOINTS)
        kitchen.robot_env.init_qpos = start
        kitchen.reset(seed=seed)
        self.perturb_after_reset(e, seed)
        self._success[e] = False
        self._read(e)

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``float32 (N, 8)`` absolute joint-position + gripper actions (module docstring)."""
        actions = self.check_actions(actions, ACTION_DIM, np.float64)
        reward = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        for e, kitchen in enumerate(self._kitchens):
            _, r, term, _, info = kitchen.step(self.benchmark_action(e, actions[e]))
            reward[e] = r
            terminated[e] = bool(term)
            self._success[e] = self._benchmark_task in info.get("episode_task_completions", ())
            self._read(e)
        truncated = np.zeros(self.num_envs, bool)
        return self._observation(), reward, terminated, truncated, {"success": self._success.copy()}

    def benchmark_action(self, env_id: int, action: np.ndarray) -> np.ndarray:
        """The benchmark's 9-dim velocity action in ``[-1, 1]`` that drives env ``env_id`` to ``action``.

        ``action`` is ``(8,)``: 7 absolute joint positions (rad) + gripper (0 open ... 1 closed).
        """
        robot = self._kitchens[env_id].robot_env
        target = np.empty(9, np.float64)
        target[:ARM_JOINTS] = action[:ARM_JOINTS]
        target[ARM_JOINTS:] = (1.0 - float(np.clip(action[ARM_JOINTS], 0.0, 1.0))) * FINGER_OPEN_M
        # The benchmark adds velocity * dt to its last observed joint positions.
        current = np.asarray(robot._last_robot_qpos[:9], dtype=np.float64)
        velocity = (target - current) / self._dt
        return np.clip(velocity / _VELOCITY_PER_ACTION, -1.0, 1.0)

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``protocol``: the fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        gymnasium-robotics' and MuJoCo's versions, the start pose's noise, the cameras and their
        size, the step limit."""
        self.check_env_id(env_id)
        versions = package_versions(("gymnasium-robotics", "mujoco", "gymnasium"))
        return {
            PROTOCOL_KEY: {
                "benchmark": "franka_kitchen",
                "suite": "FrankaKitchen-v1",
                "suite_version": versions["gymnasium-robotics"],
                "simulators": versions,
                "init_states": {"source": "the benchmark's start pose + uniform joint noise (episode seed)",
                                "init_joint_noise_rad": self.config.init_joint_noise},
                "seeding": "episode seed: joint noise and reset(seed)",
                "cameras": sorted(self._cameras) if self._frames is not None else [],
                "image_size": [self.config.image_height, self.config.image_width] if self._frames is not None else None,
                "render_quality": self.config.render_quality,
                "settle_steps": 0,
                "step_limit": self.default_max_episode_steps,
            }
        }

    # -- perturbations (arena.envs.mujoco_perturb) ----------------------------------------

    def _make_perturber(self) -> Any:
        """The batch's :class:`MujocoPerturber` (its envs share one model), or ``None`` when no
        simulator perturbation is active (then nothing is touched)."""
        from arena.envs.mujoco_perturb import MujocoPerturber
        from arena.envs.perturbations import simulator_values

        values = simulator_values(self)
        if not values:
            return None
        exterior = [c for k, c in self._cameras.items() if k != "wrist_camera_rgb"]
        perturber = MujocoPerturber(self._model, values, cameras=exterior, table_materials=TABLE_MATERIALS)
        perturber.apply_model()  # before any reset, so every episode's reset sees the same scene
        return perturber

    def perturb_after_reset(self, env_id: int, seed: int) -> None:
        """Apply the active simulator perturbations: the shared model's edits (idempotent), then
        the kettle's offset for the episode of ``seed`` in ``env_id``'s data."""
        if self._perturber is None:
            return
        self._perturber.apply_model()
        self._perturber.apply_data(self._kitchens[env_id].data, seed)

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (H, W, 3)`` frame of the first exterior camera of env ``env_id``."""
        env_id = self.check_env_id(env_id)
        if self._frames is not None:
            return self._frames["external_camera_rgb"][env_id].copy()
        mujoco = _mujoco()
        frame = np.zeros((self.config.image_height, self.config.image_width, 3), np.uint8)
        with mujoco.Renderer(self._model, self.config.image_height, self.config.image_width) as renderer:
            camera = self._cameras["external_camera_rgb"]
            self._render_into(self._kitchens[env_id].data, camera, renderer, frame)
        return frame

    def _release(self) -> None:
        """The renderer, then the simulators (the benchmark's viewer may never have been opened)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._close_each(self._kitchens, lambda kitchen: kitchen.close())
        self._kitchens = []

    # -- helpers -----------------------------------------------------------------------------

    def _read(self, e: int) -> None:
        data = self._kitchens[e].data
        self._joint_pos[e] = data.qpos[:ARM_JOINTS]
        fingers = float(np.mean(data.qpos[ARM_JOINTS : ARM_JOINTS + 2]))
        self._gripper_pos[e, 0] = np.clip(1.0 - fingers / FINGER_OPEN_M, 0.0, 1.0)
        if self._frames is not None:
            for key, camera in self._cameras.items():
                self._render_into(data, camera, self._renderer, self._frames[key][e])

    def _render_into(self, data: Any, camera: str, renderer: Any, out: np.ndarray) -> None:
        mujoco = _mujoco()

        renderer.update_scene(data, camera=camera)
        if self.config.render_quality == "fast":
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                renderer.scene.flags[flag] = 0
        renderer.render(out=out)

    def _observe_one(self, e: int) -> dict[str, Any]:
        obs: dict[str, Any] = {"policy": {"joint_pos": self._joint_pos[e], "gripper_pos": self._gripper_pos[e]}}
        if self._frames is not None:
            obs["camera_obs"] = {k: v[e] for k, v in self._frames.items()}
        obs["task"] = self.task
        return obs
