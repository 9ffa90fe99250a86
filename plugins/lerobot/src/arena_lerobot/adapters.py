"""LeRobot embodiment adapters (family ``"lerobot"``): ``aloha``, ``pusht``, ``libero``,
``metaworld`` (and ``metaworld_environment_state``).

Each turns one env of arena's batched observation into the observation LeRobot 0.4.4's
``lerobot-eval`` holds for that env just before ``preprocess_observation``, under LeRobot's
feature names, with LeRobot's flips and state composition already applied::

    observation.images.<cam> | observation.image   uint8 (H, W, 3)   HWC, native render size
    observation.state                              float32 (D,)
    observation.environment_state                  float32 (E,)      where LeRobot has one
    task                                           str               lerobot-eval's task string

:func:`arena_lerobot.features.to_policy_batch` (model venv, torch) then stacks a batch of
these and converts it exactly as ``lerobot.envs.utils.preprocess_observation`` does (HWC
uint8 -> float32 CHW / 255, state float32). These modules import numpy only: they run in
arena's interpreter, which has no torch.

Sources (``lerobot`` 0.4.4, paths under ``site-packages/lerobot``; unchanged in 0.6.1 except
the task string, which 0.6.1's ``rollout`` in ``scripts/lerobot_eval.py`` reads with
``env.call("task_description")``, else ``env.call("task")``, else ``""``: ALOHA's changed):
``envs/configs.py`` (``features_map`` of ``AlohaEnv``, ``PushtEnv``, ``LiberoEnv``,
``MetaworldEnv``), ``envs/utils.py`` 49-110 (``preprocess_observation``) and 156-185
(``add_envs_task``), ``envs/libero.py`` 138-142 and 245-289 (camera names, ``robot_state``),
``envs/metaworld.py`` 166-195 (``pixels``, ``agent_pos = raw_obs[:4]``), ``envs/factory.py``
42-99 (env processors: ``LiberoProcessorStep`` for LIBERO only, identity elsewhere),
``processor/env_processor.py`` 49-153 (``LiberoProcessorStep``), ``scripts/lerobot_eval.py``
162-189 (the order: preprocess, task, env processor, policy; the action goes to
``env.step`` unchanged). ``plugins/lerobot/README.md`` has the table.

Actions: ``lerobot-eval`` hands the policy's ``action`` (after its postprocessor) to the env
wrapper, which passes it to the simulator unchanged for all four benchmarks (its env
postprocessor is the identity, except for X-VLA), so :meth:`unpack_actions` is the identity
with the base class's shape, dtype and finiteness checks (float32 widened to float64,
exactly) and :meth:`pack_actions` its inverse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from arena.errors import ObservationError
from arena.images import to_uint8
from arena.policies.adapters import EmbodimentAdapter

#: Registry family of these adapters (``register(FAMILY, name, cls)``).
FAMILY = "lerobot"

#: LeRobot's feature names (``lerobot/utils/constants.py`` 22-25).
OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"
OBS_IMAGE = "observation.image"
OBS_IMAGES = "observation.images"

__all__ = [
    "FAMILY",
    "LEROBOT_METAWORLD_TASKS",
    "LeRobotAdapter",
    "LeRobotAlohaAdapter",
    "LeRobotEnvAdapter",
    "LeRobotFrame",
    "LeRobotLiberoAdapter",
    "LeRobotMetaWorldAdapter",
    "LeRobotMetaWorldEnvironmentStateAdapter",
    "LeRobotPushTAdapter",
    "libero_state",
]


@dataclass(frozen=True)
class LeRobotFrame:
    """One env's LeRobot observation: ``features`` (name -> array, as in the module docstring)
    and ``task``, the string ``lerobot-eval`` would pair with it (``None``: the instruction)."""

    features: dict[str, np.ndarray]
    task: str | None


def _policy(observation: dict[str, Any], key: str, env_id: int, width: int | None, adapter: str) -> np.ndarray:
    """``float64 (width,)``: env ``env_id``'s ``observation["policy"][key]``.

    Raises:
        ObservationError: the key is missing or does not hold ``width`` finite values.
    """
    try:
        values = np.asarray(observation["policy"][key][env_id], np.float64).reshape(-1)
    except KeyError:
        raise ObservationError(f"the lerobot '{adapter}' adapter needs policy['{key}'] in the observation") from None
    if width is not None and values.shape != (width,):
        raise ObservationError(f"policy['{key}'] has {values.size} values per env; the lerobot '{adapter}' adapter needs {width}")
    if not np.all(np.isfinite(values)):
        raise ObservationError(f"policy['{key}'] holds NaN or infinite values")
    return values


def _camera(observation: dict[str, Any], key: str, env_id: int, adapter: str) -> np.ndarray:
    """Env ``env_id``'s ``camera_obs[key]`` as ``uint8 (H, W, 3)`` (:func:`arena.images.to_uint8`).

    Raises:
        ObservationError: the camera is missing, is not ``(H, W, 3)``, or cannot be converted.
    """
    cameras = observation.get("camera_obs") or {}
    if key not in cameras:
        raise ObservationError(
            f"the lerobot '{adapter}' adapter needs camera_obs['{key}'] (got {sorted(cameras) or 'no cameras'}); "
            "turn the environment's cameras on"
        )
    image = to_uint8(np.asarray(cameras[key][env_id]), f"camera_obs['{key}']")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ObservationError(f"camera_obs['{key}'] has shape {image.shape} per env, expected (H, W, 3)")
    return image


def _single_camera(observation: dict[str, Any], env_id: int, adapter: str) -> np.ndarray | None:
    """The one camera of ``camera_obs`` (``None`` without cameras).

    Raises:
        ObservationError: more than one camera (which one LeRobot's single image is would be a guess).
    """
    cameras = observation.get("camera_obs") or {}
    if not cameras:
        return None
    if len(cameras) > 1:
        raise ObservationError(
            f"the lerobot '{adapter}' adapter sends one image (LeRobot's observation.image) but the "
            f"observation has cameras {sorted(cameras)}"
        )
    return _camera(observation, next(iter(cameras)), env_id, adapter)


def _env_task(observation: dict[str, Any], env_id: int) -> str | None:
    """Env ``env_id``'s entry of the observation's ``task`` (arena's task name), if any."""
    task = observation.get("task")
    if isinstance(task, str):
        return task
    if isinstance(task, (list, tuple)) and len(task) > env_id:
        return str(task[env_id])
    return None


class LeRobotAdapter(EmbodimentAdapter):
    """Base of the LeRobot adapters: :meth:`pack_request` flattens a :class:`LeRobotFrame`.

    Subclasses set ``action_dim`` and implement :meth:`extract`. Requests are flat:
    LeRobot feature names -> numpy arrays, plus ``task`` (str).
    """

    #: The name this adapter is registered under (family :data:`FAMILY`).
    name: ClassVar[str] = ""

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        raise NotImplementedError

    def pack_request(self, extracted: LeRobotFrame, instruction: str | None) -> dict[str, Any]:
        """``{feature name: array, ..., "task": str}`` (module docstring); ``task`` is the
        env's as ``lerobot-eval`` sees it, else ``instruction`` (``""`` when ``None``)."""
        request: dict[str, Any] = dict(extracted.features)
        request["task"] = extracted.task if extracted.task is not None else (instruction or "")
        return request


# -- ALOHA ----------------------------------------------------------------------------------


class LeRobotAlohaAdapter(LeRobotAdapter):
    """ALOHA sim (gym-aloha, ``obs_type="pixels_agent_pos"``: LeRobot's ``AlohaEnv`` default).

    Reads ``camera_obs/cam_high_rgb`` uint8 (N, H, W, 3) (gym-aloha's ``top`` camera) and
    ``policy/joint_pos`` float (N, 14). Request::

        observation.images.top   uint8 (H, W, 3)    gym-aloha's pixels["top"], unflipped
        observation.state        float32 (14,)      agent_pos (= qpos): per arm 6 joints (rad) + gripper
        task                     "transfer_cube"    the env's task name, see below

    ``task`` is gym-aloha's ``task`` attribute (``transfer_cube``, ``insertion``: arena's ALOHA
    task names, the observation's ``task``): ``lerobot-eval`` 0.6.1 asks the vector env
    ``env.call("task_description")``, then ``env.call("task")``, which gymnasium 1.x answers
    through the wrappers (``get_wrapper_attr``). (LeRobot 0.4.4's ``add_envs_task`` asked the
    outer wrapper and sent ``""``.) Other cameras of the observation are not sent (LeRobot's
    ALOHA sim has only ``top``). Actions: ``(H, 14)`` absolute joint targets, identity.
    """

    name: ClassVar[str] = "aloha"
    action_dim: ClassVar[int] = 14

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        return LeRobotFrame(
            features={
                f"{OBS_IMAGES}.top": _camera(observation, "cam_high_rgb", env_id, self.name),
                OBS_STATE: _policy(observation, "joint_pos", env_id, 14, self.name).astype(np.float32),
            },
            task=_env_task(observation, env_id) or "",
        )


# -- PushT ----------------------------------------------------------------------------------


class LeRobotPushTAdapter(LeRobotAdapter):
    """PushT (gym-pusht 0.1.8; LeRobot's ``PushtEnv``).

    Reads (arena's ``pusht`` environment; ``N = num_envs``)::

        camera_obs/<one camera>      uint8 (N, 96, 96, 3)   gym-pusht's "pixels" (obs types pixels*)
        policy/agent_pos             float (N, 2)           gym-pusht's "agent_pos" (px, 0..512)
        policy/state                 float (N, 5)           obs type "state": agent xy, block xy, angle
        policy/environment_state     float (N, 16)          optional: the T's 8 keypoints (x0, y0, ...)

    Request, as LeRobot's ``features_map`` (``pixels -> observation.image``, ``agent_pos ->
    observation.state``, ``environment_state -> observation.environment_state``)::

        observation.image               uint8 (96, 96, 3)   when the env renders a camera
        observation.state               float32 (2,)        agent_pos (state[:2] when only ``state`` is there)
        observation.environment_state   float32 (16,)       when the env provides it
        task                            ""                  gym-pusht has no task attribute

    Actions: ``(H, 2)`` target positions of the agent (px), identity.
    """

    name: ClassVar[str] = "pusht"
    action_dim: ClassVar[int] = 2

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        policy = observation.get("policy") or {}
        if "agent_pos" in policy:
            agent_pos = _policy(observation, "agent_pos", env_id, 2, self.name)
        elif "state" in policy:  # gym-pusht's state: agent_pos is its first two values, bit for bit
            agent_pos = _policy(observation, "state", env_id, 5, self.name)[:2]
        else:
            raise ObservationError(f"the lerobot '{self.name}' adapter needs policy['agent_pos'] (or policy['state'])")
        features: dict[str, np.ndarray] = {}
        image = _single_camera(observation, env_id, self.name)
        if image is not None:
            features[OBS_IMAGE] = image
        features[OBS_STATE] = agent_pos.astype(np.float32)
        if "environment_state" in policy:
            features[OBS_ENV_STATE] = _policy(observation, "environment_state", env_id, 16, self.name).astype(np.float32)
        return LeRobotFrame(features=features, task="")


# -- LIBERO ---------------------------------------------------------------------------------


def libero_state(eef_pos: np.ndarray, eef_quat: np.ndarray, gripper_qpos: np.ndarray) -> np.ndarray:
    """``float32 (8,)``: eef position (3), eef axis-angle (3), gripper qpos (2), as LeRobot's
    ``LiberoProcessorStep`` builds ``observation.state`` (``processor/env_processor.py`` 62-153).

    LeRobot casts the quaternion ``(x, y, z, w)`` to float32 and computes in float32:
    ``w = clamp(q_w, -1, 1)``, ``den = sqrt(max(1 - w * w, 0))``, axis-angle
    ``(q_xyz / den) * (2 * acos(w))`` where ``den > 1e-10`` else zeros; position and gripper
    go from float64 to float32. Every operation here is the same float32 operation except
    ``acos``, taken correctly rounded (float64 ``math.acos`` rounded to float32): torch's own
    float32 ``acos`` is not correctly rounded and differs between its scalar and vectorised
    paths (batches of >= 16 envs), so LeRobot's value itself depends on ``lerobot-eval``'s
    ``n_envs`` in the last bit. The axis-angle values here are within 2 ulp of LeRobot's
    (``tests/test_lerobot_adapters_equivalence.py``); the other five are bit-exact.
    """
    quat = np.asarray(eef_quat, np.float64).reshape(4).astype(np.float32)
    w = np.float32(min(max(quat[3], np.float32(-1.0)), np.float32(1.0)))
    den = np.sqrt(np.float32(max(np.float32(np.float32(1.0) - w * w), np.float32(0.0))))
    if den > 1e-10:
        angle = np.float32(2.0) * np.float32(math.acos(float(w)))
        axis_angle = (quat[:3] / den) * angle
    else:
        axis_angle = np.zeros(3, np.float32)
    return np.concatenate([
        np.asarray(eef_pos, np.float64).reshape(3).astype(np.float32),
        axis_angle.astype(np.float32),
        np.asarray(gripper_qpos, np.float64).reshape(2).astype(np.float32),
    ])


class LeRobotLiberoAdapter(LeRobotAdapter):
    """LIBERO (LeRobot's ``LiberoEnv``, ``obs_type="pixels_agent_pos"``, its default cameras).

    Reads the Arena layout of the ``libero`` environment: ``camera_obs/agentview_rgb`` and
    ``camera_obs/eye_in_hand_rgb`` uint8 (N, S, S, 3) as LIBERO renders them (upside down),
    ``policy/eef_pos`` (N, 3), ``policy/eef_quat`` (N, 4) ``(x, y, z, w)``,
    ``policy/gripper_qpos`` (N, 2). Request::

        observation.images.image    uint8 (S, S, 3)   agentview, rotated 180 degrees
        observation.images.image2   uint8 (S, S, 3)   eye-in-hand, rotated 180 degrees
        observation.state           float32 (8,)      :func:`libero_state`
        task                        the instruction   LIBERO's task.language (task_description)

    The names are ``LiberoEnv``'s ``camera_name_mapping`` (``agentview_image -> image``,
    ``robot0_eye_in_hand_image -> image2``); the rotation (flip of H and W) and the state are
    what ``LiberoProcessorStep`` does after ``preprocess_observation`` — a flip commutes with
    the uint8 -> float conversion, so doing it here gives the same tensors. LeRobot renders at
    256 x 256 (``LiberoEnv``'s default; ``LiberoEnv`` config's 360 is not passed to the env).
    Actions: ``(H, 7)`` OSC_POSE deltas + gripper, identity.
    """

    name: ClassVar[str] = "libero"
    action_dim: ClassVar[int] = 7

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        def rotated(key: str) -> np.ndarray:
            return np.ascontiguousarray(_camera(observation, key, env_id, self.name)[::-1, ::-1])

        return LeRobotFrame(
            features={
                f"{OBS_IMAGES}.image": rotated("agentview_rgb"),
                f"{OBS_IMAGES}.image2": rotated("eye_in_hand_rgb"),
                OBS_STATE: libero_state(
                    _policy(observation, "eef_pos", env_id, 3, self.name),
                    _policy(observation, "eef_quat", env_id, 4, self.name),
                    _policy(observation, "gripper_qpos", env_id, 2, self.name),
                ),
            },
            task=None,
        )


# -- Meta-World -----------------------------------------------------------------------------

#: ``lerobot-eval``'s Meta-World instructions (``task_description``), which differ in wording
#: from arena's: LeRobot 0.4.4 ``envs/metaworld_config.json`` ``TASK_DESCRIPTIONS``
#: (the equivalence test compares this table with that file).
LEROBOT_METAWORLD_TASKS: dict[str, str] = {
    'assembly-v3': 'Pick up a nut and place it onto a peg',
    'basketball-v3': 'Dunk the basketball into the basket',
    'bin-picking-v3': 'Grasp the puck from one bin and place it into another bin',
    'box-close-v3': 'Grasp the cover and close the box with it',
    'button-press-topdown-v3': 'Press a button from the top',
    'button-press-topdown-wall-v3': 'Bypass a wall and press a button from the top',
    'button-press-v3': 'Press a button',
    'button-press-wall-v3': 'Bypass a wall and press a button',
    'coffee-button-v3': 'Push a button on the coffee machine',
    'coffee-pull-v3': 'Pull a mug from a coffee machine',
    'coffee-push-v3': 'Push a mug under a coffee machine',
    'dial-turn-v3': 'Rotate a dial 180 degrees',
    'disassemble-v3': 'Pick a nut out of a peg',
    'door-close-v3': 'Close a door with a revolving joint',
    'door-lock-v3': 'Lock the door by rotating the lock clockwise',
    'door-open-v3': 'Open a door with a revolving joint',
    'door-unlock-v3': 'Unlock the door by rotating the lock counter-clockwise',
    'hand-insert-v3': 'Insert the gripper into a hole',
    'drawer-close-v3': 'Push and close a drawer',
    'drawer-open-v3': 'Open a drawer',
    'faucet-open-v3': 'Rotate the faucet counter-clockwise',
    'faucet-close-v3': 'Rotate the faucet clockwise',
    'hammer-v3': 'Hammer a screw on the wall',
    'handle-press-side-v3': 'Press a handle down sideways',
    'handle-press-v3': 'Press a handle down',
    'handle-pull-side-v3': 'Pull a handle up sideways',
    'handle-pull-v3': 'Pull a handle up',
    'lever-pull-v3': 'Pull a lever down 90 degrees',
    'peg-insert-side-v3': 'Insert a peg sideways',
    'pick-place-wall-v3': 'Pick a puck, bypass a wall and place the puck',
    'pick-out-of-hole-v3': 'Pick up a puck from a hole',
    'reach-v3': 'Reach a goal position',
    'push-back-v3': 'Push the puck to a goal',
    'push-v3': 'Push the puck to a goal',
    'pick-place-v3': 'Pick and place a puck to a goal',
    'plate-slide-v3': 'Slide a plate into a cabinet',
    'plate-slide-side-v3': 'Slide a plate into a cabinet sideways',
    'plate-slide-back-v3': 'Get a plate from the cabinet',
    'plate-slide-back-side-v3': 'Get a plate from the cabinet sideways',
    'peg-unplug-side-v3': 'Unplug a peg sideways',
    'soccer-v3': 'Kick a soccer into the goal',
    'stick-push-v3': 'Grasp a stick and push a box using the stick',
    'stick-pull-v3': 'Grasp a stick and pull a box with the stick',
    'push-wall-v3': 'Bypass a wall and push a puck to a goal',
    'reach-wall-v3': 'Bypass a wall and reach a goal',
    'shelf-place-v3': 'Pick and place a puck onto a shelf',
    'sweep-into-v3': 'Sweep a puck into a hole',
    'sweep-v3': 'Sweep a puck off the table',
    'window-open-v3': 'Push and open a window',
    'window-close-v3': 'Push and close a window',
}


class LeRobotMetaWorldAdapter(LeRobotAdapter):
    """Meta-World v3 (LeRobot's ``MetaworldEnv``, ``obs_type="pixels_agent_pos"``).

    Reads ``policy/state`` float (N, 39) and, when the environment renders, its one camera
    ``camera_obs/<camera>`` uint8 (N, S, S, 3). Request::

        observation.image               uint8 (S, S, 3)   when the env renders (see below)
        observation.state               float32 (4,)      agent_pos = state[:4]: hand xyz (m), gripper opening
        observation.environment_state   float32 (39,)     only with ``environment_state=True``
        task                            LeRobot's wording of the task (:data:`LEROBOT_METAWORLD_TASKS`)

    LeRobot renders the ``corner2`` camera at 480 x 480 and rotates it 180 degrees
    (``np.flip(image, (0, 1))``); arena's ``metaworld`` environment with ``camera: corner2``,
    ``upright: true`` (its default) and ``image_size: 480`` renders the same rotation, so the
    image is sent as it arrives. LeRobot also moves ``corner2`` to ``cam_pos = [0.75, 0.075,
    0.7]`` (``lerobot/envs/metaworld.py`` l.154-155, 0.6.1): arena's environment does too with
    ``camera_pose: lerobot`` (without it, its frames show the scene from Meta-World's own
    ``corner2`` position), and ``scenes: lerobot`` gives a seed LeRobot's scene; with both, the
    environment's workers run in the ``lerobot`` venv and its frames and states are LeRobot's byte
    for byte (plugins/lerobot/README.md, "lerobot-eval-exact options of arena's own environments").

    ``environment_state=True`` adds Meta-World's full 39-dim observation (hand, gripper, both
    objects' poses, previous frame, goal) as ``observation.environment_state``, the key
    ``preprocess_observation`` fills from an env's ``environment_state`` (as gym-pusht's
    ``environment_state_agent_pos`` obs type does). LeRobot 0.4.4's Meta-World env has no such
    obs type (its ``state`` obs type raises ``NotImplementedError``): this is for policies
    trained on arena's recordings, whose goal must be observable. Registered as
    ``metaworld_environment_state``. Actions: ``(H, 4)`` end-effector xyz delta + gripper
    effort in [-1, 1], identity.
    """

    name: ClassVar[str] = "metaworld"
    action_dim: ClassVar[int] = 4
    #: Default of ``environment_state`` for the registered class.
    send_environment_state: ClassVar[bool] = False

    def __init__(self, environment_state: bool | None = None) -> None:
        self.environment_state = self.send_environment_state if environment_state is None else bool(environment_state)

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        state = _policy(observation, "state", env_id, 39, self.name)
        features: dict[str, np.ndarray] = {}
        image = _single_camera(observation, env_id, self.name)
        if image is not None:
            features[OBS_IMAGE] = image
        features[OBS_STATE] = state[:4].astype(np.float32)
        if self.environment_state:
            features[OBS_ENV_STATE] = state.astype(np.float32)
        task = _env_task(observation, env_id)
        return LeRobotFrame(features=features, task=LEROBOT_METAWORLD_TASKS.get(task) if task else None)


class LeRobotMetaWorldEnvironmentStateAdapter(LeRobotMetaWorldAdapter):
    """:class:`LeRobotMetaWorldAdapter` with ``environment_state=True``: also sends the 39-dim
    state as ``observation.environment_state``."""

    name: ClassVar[str] = "metaworld_environment_state"
    send_environment_state: ClassVar[bool] = True


# -- any LeRobot env through the bridge (arena_lerobot.bridge) ----------------------------------


class LeRobotEnvAdapter(LeRobotAdapter):
    """The ``lerobot_env`` bridge's observation, already under LeRobot's feature names
    (:func:`arena_lerobot.bridge.lerobot_observation`): every ``camera_obs`` image (``uint8
    (H, W, 3)``) and ``policy`` array (``float32``) is sent under its own key, the env's task
    string as ``task``. Actions: the identity, ``action_dim`` the environment's (:meth:`bind`,
    which ``lerobot_remote`` calls when it starts)."""

    name: ClassVar[str] = "lerobot_env"
    action_dim: int = 0

    def bind(self, env: Any) -> None:
        """Take the action width from the bridge environment (``action_space``)."""
        shape = getattr(getattr(env, "action_space", None), "shape", None)
        if shape:
            self.action_dim = int(np.prod(shape))

    def extract(self, observation: dict[str, Any], env_id: int) -> LeRobotFrame:
        features: dict[str, np.ndarray] = {}
        for key in observation.get("camera_obs") or {}:
            features[key] = _camera(observation, key, env_id, self.name)
        for key, value in (observation.get("policy") or {}).items():
            array = np.asarray(value[env_id])
            if not np.all(np.isfinite(array)):
                raise ObservationError(f"policy['{key}'] holds NaN or infinite values")
            features[key] = array.astype(np.float32)
        if not features:
            raise ObservationError("the lerobot 'lerobot_env' adapter found no camera_obs or policy arrays")
        task = _env_task(observation, env_id)
        return LeRobotFrame(features=features, task=task if task is not None else "")


#: Every adapter of this module, as registered: ``name -> class``.
ADAPTERS: dict[str, type[LeRobotAdapter]] = {
    cls.name: cls
    for cls in (
        LeRobotAlohaAdapter,
        LeRobotPushTAdapter,
        LeRobotLiberoAdapter,
        LeRobotMetaWorldAdapter,
        LeRobotMetaWorldEnvironmentStateAdapter,
        LeRobotEnvAdapter,
    )
}
