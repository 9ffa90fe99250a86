"""Meta-World v3 (Sawyer arm, MuJoCo) behind arena's vectorized :class:`Environment`.

One batch runs ``num_envs`` copies of one of the 50 Meta-World v3 tasks (``reach-v3``,
``pick-place-v3``, ...). Each episode is fixed by its seed alone: the seed picks one of the
task's 50 MT1 goal variations (a ``numpy`` Generator seeded with the episode seed), sets it,
and resets the simulator, so the same seed gives the same trajectory on any env of any batch,
in-process or in a worker, whatever ran before.

Observation (Arena layout)::

    {"policy":     {"state": float64 (num_envs, 39)},     # Meta-World's goal-observable state
     "camera_obs": {CAMERA: uint8 (num_envs, S, S, 3)},    # only when cameras are on
     "task":       list[str] of num_envs task names}

``camera_pose: lerobot`` (with ``camera: corner2``) renders from LeRobot's pose of that camera
(:data:`LEROBOT_CORNER2_POS`); with ``image_size: 480`` and ``upright: true`` the frame is the
one LeRobot's Meta-World env gives for the same physical state (plugins/lerobot/README.md,
"lerobot-eval-exact options", states the measured difference). ``scenes: lerobot`` samples
scenes as LeRobot 0.6's env does (the episode seed seeds the env's own generator, which draws
the object/goal vector), so with both options the seed's episode is LeRobot's. Either option
runs the envs in worker processes under the ``lerobot`` venv's interpreter
(:meth:`MetaWorldEnvironment.default_venv_for`): LeRobot's MuJoCo, whose reset states and frames
are LeRobot's byte for byte, where arena's own MuJoCo resets a fraction of a millimetre apart.

Actions are ``float32 (num_envs, 4)`` in ``[-1, 1]``: end-effector xyz deltas and gripper
effort. Meta-World never terminates an episode itself and its own 500-step limit is lifted;
the rollout decides timeouts (``default_max_episode_steps = 500``, Meta-World's horizon).

Headless rendering: importing this module chooses MuJoCo's OpenGL platform when the user has
not (:mod:`arena.rendering`: EGL on a node with an NVIDIA GPU, OSMesa otherwise), before
MuJoCo is imported. Software rendering costs roughly 80-500 ms per 224x224 frame on a CPU (the
first frame of a process ~1 s), so ``cameras`` is off unless a policy needs images.

Workers: the config's ``workers`` (:mod:`arena.envs.workers`) spreads the envs over worker
processes stepped in parallel. It pays when a step is expensive, i.e. with cameras on and
more than one free core; without cameras a Meta-World step takes ~1 ms, about what a round
trip to a worker costs, so in-process (``workers: 0``) is as fast or faster.

Needs the ``metaworld`` extra: ``pip install 'arena-core[metaworld]'``.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import Field, field_validator, model_validator

from arena.envs.base import EnvironmentConfig
from arena.envs.perturbations import MUJOCO
from arena.envs.serial import SerialEnvironment
from arena.extras import import_extra
from arena.outputs.fingerprint import package_versions
from arena.rendering import configure_headless_rendering

configure_headless_rendering()

#: Natural-language instruction of every Meta-World v3 task (the keys are the task names).
TASK_DESCRIPTIONS: dict[str, str] = {
    "assembly-v3": "Pick up the nut and place it onto the peg.",
    "basketball-v3": "Pick up the basketball and dunk it into the hoop.",
    "bin-picking-v3": "Pick up the puck from one bin and place it into the other bin.",
    "box-close-v3": "Pick up the lid and place it on the box to close it.",
    "button-press-topdown-v3": "Press the button from the top.",
    "button-press-topdown-wall-v3": "Reach past the wall and press the button from the top.",
    "button-press-v3": "Press the button from the front.",
    "button-press-wall-v3": "Reach past the wall and press the button from the front.",
    "coffee-button-v3": "Press the button on the coffee machine.",
    "coffee-pull-v3": "Pull the coffee mug out from the coffee machine to the goal.",
    "coffee-push-v3": "Push the coffee mug under the coffee machine.",
    "dial-turn-v3": "Turn the dial to the goal position.",
    "disassemble-v3": "Pick the nut up and off the peg.",
    "door-close-v3": "Close the door.",
    "door-lock-v3": "Lock the door by turning the lock.",
    "door-open-v3": "Open the door.",
    "door-unlock-v3": "Unlock the door by turning the lock.",
    "drawer-close-v3": "Push the drawer closed.",
    "drawer-open-v3": "Pull the drawer open.",
    "faucet-close-v3": "Turn the faucet handle to close the faucet.",
    "faucet-open-v3": "Turn the faucet handle to open the faucet.",
    "hammer-v3": "Pick up the hammer and hammer the nail into the wall.",
    "hand-insert-v3": "Move the gripper into the hole.",
    "handle-press-side-v3": "Press the handle down from the side.",
    "handle-press-v3": "Press the handle down.",
    "handle-pull-side-v3": "Pull the handle up from the side.",
    "handle-pull-v3": "Pull the handle up.",
    "lever-pull-v3": "Pull the lever up.",
    "peg-insert-side-v3": "Pick up the peg and insert it sideways into the hole.",
    "peg-unplug-side-v3": "Pull the peg sideways out of the hole.",
    "pick-out-of-hole-v3": "Pick the puck up out of the hole and lift it to the goal.",
    "pick-place-v3": "Pick up the puck and place it at the goal.",
    "pick-place-wall-v3": "Pick up the puck, carry it over the wall and place it at the goal.",
    "plate-slide-back-side-v3": "Slide the plate sideways out of the cabinet.",
    "plate-slide-back-v3": "Slide the plate back out of the cabinet.",
    "plate-slide-side-v3": "Slide the plate sideways into the cabinet.",
    "plate-slide-v3": "Slide the plate into the cabinet.",
    "push-back-v3": "Pull the puck back to the goal.",
    "push-v3": "Push the puck to the goal.",
    "push-wall-v3": "Push the puck around the wall to the goal.",
    "reach-v3": "Reach the red goal position with the gripper.",
    "reach-wall-v3": "Reach over the wall to the goal position with the gripper.",
    "shelf-place-v3": "Pick up the puck and place it on the shelf.",
    "soccer-v3": "Push the soccer ball into the goal.",
    "stick-pull-v3": "Grasp the stick and use it to pull the container to the goal.",
    "stick-push-v3": "Grasp the stick and use it to push the container to the goal.",
    "sweep-into-v3": "Sweep the puck into the hole.",
    "sweep-v3": "Sweep the puck off the edge of the table.",
    "window-close-v3": "Slide the window closed.",
    "window-open-v3": "Slide the window open.",
}

#: The 50 Meta-World v3 task names, sorted.
TASKS: tuple[str, ...] = tuple(sorted(TASK_DESCRIPTIONS))

#: Cameras defined in Meta-World's scene.
CAMERAS = ("corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV")
CameraName = Literal[
    "corner", "corner2", "corner3", "corner4", "topview", "behindGripper", "gripperPOV"
]
#: Cameras that Meta-World renders upside down (rotated 180 degrees).
_UPSIDE_DOWN_CAMERAS = frozenset({"corner", "corner2", "corner3", "corner4"})

#: Where LeRobot puts the ``corner2`` camera (``lerobot/envs/metaworld.py`` l.154-155, 0.6.1;
#: 0.4.4 the same): ``model.cam_pos`` only, orientation and fovy kept. Meta-World 3.1's own
#: ``corner4`` is this very pose (``xyz_base.xml``: same position, quaternion and fovy 60 as
#: ``corner2``; Meta-World 3.0.0, LeRobot's pin, has no ``corner4``).
LEROBOT_CORNER2_POS = (0.75, 0.075, 0.7)

#: The venv whose interpreter runs the workers of a run with a LeRobot option
#: (:meth:`MetaWorldEnvironment.default_venv_for`): the ``lerobot`` model venv the LeRobot plugin
#: declares (``arena venv setup lerobot``; LeRobot 0.6.1, Meta-World 3.0.0, MuJoCo 3.8.1).
LEROBOT_VENV = "lerobot"

#: Seed of the MT1 benchmark LeRobot's Meta-World env takes its first task from
#: (``lerobot/envs/metaworld.py`` l.151, 0.6.1), for ``scenes: lerobot``.
LEROBOT_MT1_SEED = 42

#: Seed of the MT1 benchmark whose 50 goal variations episodes choose from. Fixed, so a
#: seed means the same episode in every process and every run.
GOAL_SET_SEED = 0

STATE_DIM = 39
ACTION_DIM = 4
# Meta-World raises ValueError when stepped past ``max_path_length``; arena owns timeouts.
_NO_PATH_LIMIT = 2**62


def check_task_name(task: str) -> str:
    """Return ``task`` if it is a Meta-World v3 task; otherwise raise ``ValueError``.

    The message lists the closest task names (or all of them when none is close).
    """
    if task in TASK_DESCRIPTIONS:
        return task
    close = difflib.get_close_matches(task, TASKS, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known tasks: {', '.join(TASKS)}"
    raise ValueError(f"unknown Meta-World task {task!r}; {hint}")


class MetaWorldConfig(EnvironmentConfig):
    """Options of a Meta-World run (experiment key ``environment``, ``type: metaworld``)."""

    task: str = Field(description="Meta-World v3 task name, e.g. 'reach-v3', 'pick-place-v3'")
    camera: CameraName = Field(
        "corner", description="Meta-World camera rendered for camera_obs and videos"
    )
    image_size: int = Field(224, ge=16, le=2048, description="frame side in pixels (square)")
    cameras: bool = Field(False, description="produce camera_obs every step (slow on a CPU)")
    upright: bool = Field(
        True,
        description="rotate frames of the corner cameras by 180 degrees so the table is at "
        "the bottom (Meta-World renders them upside down); false keeps its raw frames",
    )
    camera_pose: Literal["metaworld", "lerobot"] = Field(
        "metaworld",
        description="'lerobot': move the corner2 camera where LeRobot's Meta-World env puts it "
        "(cam_pos 0.75, 0.075, 0.7; Meta-World 3.1's corner4), to render what lerobot-eval's "
        "policies saw in training (with camera: corner2, image_size: 480, upright: true); "
        "'metaworld': Meta-World's own pose",
    )

    scenes: Literal["goal_variations", "lerobot"] = Field(
        "goal_variations",
        description="how an episode seed sets the object/goal positions: 'goal_variations', one of MT1's 50 "
        "(arena's, see GOAL_SET_SEED); 'lerobot', as LeRobot 0.6's Meta-World env, a vector drawn from "
        "the env's own generator seeded with the episode seed (the same seed, the same scene as lerobot-eval)",
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return check_task_name(value)

    @model_validator(mode="after")
    def _lerobot_pose_is_corner2(self) -> "MetaWorldConfig":
        if self.camera_pose == "lerobot" and self.camera != "corner2":
            raise ValueError(
                f"camera_pose: lerobot moves the corner2 camera (LeRobot's), not {self.camera!r}: set camera: corner2"
            )
        return self

    def validate_run(self, run: Any) -> None:
        """Image perturbations need ``cameras: true`` (without, the perturbed run would equal the
        nominal one); ``ValueError`` otherwise."""
        from arena.envs.perturbations import GENERIC, IMAGE_PERTURBATIONS

        images = [k for k in IMAGE_PERTURBATIONS if k in self.perturbations and not GENERIC[k].is_nominal(self.perturbations[k])]
        if images and not self.cameras:
            raise ValueError(f"image perturbations ({', '.join(images)}) need camera images: set environment.cameras: true")


@functools.lru_cache(maxsize=None)
def _lerobot_first_task(task: str) -> Any:
    """The MT1 task LeRobot's env sets before it unfreezes the scene sampling (its
    ``MT1(task, seed=42).train_tasks[0]``)."""
    return import_metaworld().MT1(task, seed=LEROBOT_MT1_SEED).train_tasks[0]


@functools.lru_cache(maxsize=None)
def _goal_variations(task: str) -> tuple:
    """The 50 MT1 goal variations of ``task`` (Meta-World ``Task`` tuples; ~0.8 s to build)."""
    metaworld = import_metaworld()
    return tuple(metaworld.MT1(task, seed=GOAL_SET_SEED).train_tasks)


def import_metaworld() -> Any:
    """The ``metaworld`` package (MuJoCo is imported with it).

    Raises:
        arena.extras.MissingExtraError: not installed; names ``pip install 'arena-core[metaworld]'``.
    """
    return import_extra("metaworld", "metaworld", "the Meta-World environment")


#: Materials of Meta-World's table (its wood texture and its frame), tinted by ``table_color``.
TABLE_MATERIALS = ("table_wood", "table_col")


class MetaWorldEnvironment(SerialEnvironment):
    """``num_envs`` Meta-World v3 envs of one task in this process (see the module docstring).

    Raises:
        ValueError: ``num_envs < 1``, bad env ids or seeds, or actions of the wrong shape.
        arena.extras.MissingExtraError: Meta-World is not installed.
    """

    name = "metaworld"
    Config = MetaWorldConfig
    success_key = "success"  # Meta-World's own info["success"]
    default_max_episode_steps = 500
    #: Live mode (arena.live): xyz are mocap deltas, so holding still is a null action; the
    #: gripper is an effort command that keeps its last value (NaN in the null action).
    hold_rules = ("continue_chunk", "null_action")
    #: frame_skip 5 of MuJoCo's 2.5 ms timestep: 80 control steps per second.
    control_hz = 80.0

    @classmethod
    def null_action_for(cls, config: MetaWorldConfig) -> np.ndarray:
        return np.array([0.0, 0.0, 0.0, np.nan])

    @classmethod
    def default_venv_for(cls, config: MetaWorldConfig) -> str | None:
        """:data:`LEROBOT_VENV` when a LeRobot option is set (``camera_pose: lerobot`` or
        ``scenes: lerobot``), else ``None`` (this interpreter). LeRobot's episodes need LeRobot's
        simulator build: Meta-World 3.0.0 built as LeRobot builds it resets to another state under
        MuJoCo 3.3.0 (arena's ``metaworld`` extra: Meta-World 3.1.1 pins it) than under the
        venv's MuJoCo 3.8.1 (hand 0.16 mm, object 0.57 mm apart: issue 53), so the workers of such a run
        run in the ``lerobot`` venv, where they are LeRobot's byte for byte. ``python`` in the
        config still wins; without the venv the envs run in this interpreter (``arena validate``
        warns, the records' ``protocol.simulators`` name the MuJoCo that ran)."""
        return LEROBOT_VENV if "lerobot" in (config.camera_pose, config.scenes) else None

    #: Every MuJoCo scene perturbation (:mod:`arena.envs.mujoco_perturb`): the camera is the
    #: config's ``camera``, the table its wood and frame materials, the objects the task's free
    #: bodies (reach-v3's puck, push-v3's puck, ...; none in tasks without free objects).
    perturbations = tuple(MUJOCO.values())

    def __init__(self, config: MetaWorldConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=bool(cameras or config.cameras))
        metaworld = import_metaworld()  # heavy (MuJoCo); imported only when envs are built
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self.task_description = TASK_DESCRIPTIONS[config.task]
        self._rotate = config.upright and config.camera in _UPSIDE_DOWN_CAMERAS
        self._goals = _goal_variations(config.task) if config.scenes != "lerobot" else ()
        env_cls = metaworld.env_dict.ALL_V3_ENVIRONMENTS[config.task]
        size = config.image_size
        self._envs = []
        for _ in range(num_envs):
            env = env_cls(render_mode="rgb_array", camera_name=config.camera, width=size, height=size)
            env.max_path_length = _NO_PATH_LIMIT
            if config.camera_pose == "lerobot":  # before the perturbers read the nominal pose
                env.model.camera("corner2").pos[:] = LEROBOT_CORNER2_POS
            if config.scenes == "lerobot":
                self._sample_scenes_as_lerobot(env)
            self._envs.append(env)
        self._perturbers = self._make_perturbers(config)
        self._state = np.zeros((num_envs, STATE_DIM), np.float64)
        self._frames = np.zeros((num_envs, size, size, 3), np.uint8) if self.cameras else None
        self._start_episodes()

    # -- Environment API ---------------------------------------------------------------------

    def _sample_scenes_as_lerobot(self, env: Any) -> None:
        """Set ``env`` up as LeRobot 0.6.1's ``MetaworldEnv._ensure_env`` does
        (``lerobot/envs/metaworld.py`` l.151-158): MT1 seed 42's first task, one reset, then
        scenes drawn at each reset from the env's own ``np_random`` (``seeded_rand_vec``,
        Meta-World's ``sawyer_xyz_env.py`` ``_get_state_rand_vec``), which :meth:`_reset_one`
        seeds with the episode seed as LeRobot's ``reset`` does (l.224-226)."""
        env.set_task(_lerobot_first_task(self.config.task))
        env.reset()
        env._freeze_rand_vec = False
        env.seeded_rand_vec = True

    def _reset_one(self, e: int, seed: int) -> None:
        """Seed ``seed`` (an int >= 0) picks the goal variation (``scenes: lerobot``: seeds the
        env's scene sampling), then seeds and resets the env."""
        env = self._envs[e]
        if self.config.scenes != "lerobot":
            goal = int(np.random.default_rng(seed).integers(len(self._goals)))
            env.set_task(self._goals[goal])
        env.seed(seed)
        obs, _ = env.reset(seed=seed)
        if self._perturbers is not None:
            obs = self._perturb(e, seed, obs)
        self._state[e] = obs
        if self._frames is not None:
            self._frames[e] = self._render(e)

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``float32 (num_envs, 4)`` actions (Meta-World clips them to ``[-1, 1]``)."""
        actions = self.check_actions(actions, ACTION_DIM, np.float32, finite=False)
        reward = np.zeros(self.num_envs, np.float64)
        success = np.zeros(self.num_envs, bool)
        for e, env in enumerate(self._envs):
            obs, r, _, _, info = env.step(actions[e])
            self._state[e] = obs
            reward[e] = r
            success[e] = bool(info.get("success", 0.0))
            if self._frames is not None:
                self._frames[e] = self._render(e)
        none = np.zeros(self.num_envs, bool)
        return self._observation(), reward, none, none.copy(), {"success": success}

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``protocol``: :meth:`protocol`, the fingerprint of this run's episodes."""
        self.check_env_id(env_id)
        return super().episode_info(env_id)

    def protocol(self) -> dict[str, Any]:
        """The fingerprint of this run's episodes (:mod:`arena.outputs.fingerprint`):
        Meta-World's and MuJoCo's versions, the goal variations episodes draw from (MT1's train
        tasks of :data:`GOAL_SET_SEED`), the camera and image size, the step limit."""
        versions = package_versions(("metaworld", "mujoco"))
        task = self.config.task
        if self.config.scenes == "lerobot":
            init_states = {"source": f"seeded_rand_vec after MT1({task!r}, seed={LEROBOT_MT1_SEED}).train_tasks[0] (LeRobot's)"}
            seeding = "episode seed: env.seed(seed) and reset, scenes from the env's seeded generator (LeRobot's)"
        else:
            init_states = {"source": f"MT1({task!r}, seed={GOAL_SET_SEED}).train_tasks", "count": len(self._goals)}
            seeding = "episode seed: goal variation and reset(seed)"
        fingerprint = {
            "benchmark": "metaworld",
            "suite": "MT1",
            "suite_version": versions["metaworld"],
            "simulators": versions,
            "init_states": init_states,
            "seeding": seeding,
            "cameras": [self.config.camera] if self._frames is not None else [],
            "image_size": [self.config.image_size] * 2 if self._frames is not None else None,
            "settle_steps": 0,
            "step_limit": self.default_max_episode_steps,
        }
        if self.config.camera_pose == "lerobot":  # absent otherwise: earlier records compare as before
            fingerprint["camera_pose"] = "lerobot"
        return fingerprint

    # -- perturbations (arena.envs.mujoco_perturb) ----------------------------------------

    def _make_perturbers(self, config: MetaWorldConfig) -> list[Any] | None:
        """One :class:`MujocoPerturber` per env (each env has its own model), or ``None`` when no
        simulator perturbation is active (then nothing is touched)."""
        from arena.envs.mujoco_perturb import MujocoPerturber
        from arena.envs.perturbations import simulator_values

        values = simulator_values(self)
        if not values:
            return None
        perturbers = [
            MujocoPerturber(env.model, values, cameras=[config.camera], table_materials=TABLE_MATERIALS)
            for env in self._envs
        ]
        for perturber in perturbers:  # before any reset, so every episode's reset sees the same scene
            perturber.apply_model()
        return perturbers

    def _perturb(self, e: int, seed: int, obs: np.ndarray) -> np.ndarray:
        """``perturb_after_reset``, returning the observation read again when objects moved."""
        if self.perturb_after_reset(e, seed):
            env = self._envs[e]
            obs = np.asarray(env._get_obs(), np.float64)  # Meta-World's own reading of the moved scene
            obs[18:36] = obs[:18]  # as its reset does: the previous frame is the first one
            env._prev_obs = obs[:18].copy()
        return obs

    def perturb_after_reset(self, env_id: int, seed: int) -> bool:
        """Apply the active simulator perturbations to ``env_id`` (model edits, then the object
        offset of ``seed``); returns whether objects moved."""
        if self._perturbers is None:
            return False
        perturber = self._perturbers[env_id]
        perturber.apply_model()
        return perturber.apply_data(self._envs[env_id].data, seed)

    def render(self, env_id: int) -> np.ndarray:
        """``uint8 (S, S, 3)`` frame of ``env_id`` (the current camera_obs when cameras are on)."""
        env_id = self.check_env_id(env_id)
        if self._frames is not None:
            return self._frames[env_id].copy()
        return self._render(env_id)

    def _release(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []

    # -- helpers -----------------------------------------------------------------------------

    def _render(self, e: int) -> np.ndarray:
        frame = np.asarray(self._envs[e].render(), dtype=np.uint8)
        if self._rotate:
            frame = frame[::-1, ::-1]
        return np.ascontiguousarray(frame)

    def _observe_one(self, e: int) -> dict[str, Any]:
        obs: dict[str, Any] = {"policy": {"state": self._state[e]}}
        if self._frames is not None:
            obs["camera_obs"] = {self.config.camera: self._frames[e]}
        obs["task"] = self.config.task
        return obs
