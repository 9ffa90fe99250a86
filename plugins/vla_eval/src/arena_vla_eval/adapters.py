"""vla-eval adapters (family ``"vla_eval"``): arena's layouts -> vla-eval's observation dict.

vla-eval's convention (``vla_eval/types.py``, "Observation", and every benchmark's
``make_obs``): ``{"images": {camera: uint8 (H, W, C)}, "task_description": str}`` plus, when
the benchmark is asked to (``send_state``), a flat proprioceptive vector under ``"states"``.
Which optional parts are sent are **observation params**: the model server names the ones it
needs in its HELLO (``observation_params``, e.g. ``{"send_wrist_image": true, "send_state":
true}``), the run's ``observation_params`` override them (vla-eval: "eval config wins",
``orchestrator._merge_observation_params``), and a key the adapter does not know is reported,
not silently dropped.

The reply is one action per observation, ``actions (action_dim,)`` (float32 after the
server's normalization); :meth:`VlaEvalAdapter.unpack_actions` returns it as a one-row chunk.

* ``libero`` -- exactly vla-eval's ``LIBEROBenchmark.make_obs`` and ``step``
  (``vla_eval/benchmarks/libero/benchmark.py`` in vla-eval 0.8.0, proven equal by
  ``tests/test_vla_eval_adapters.py`` running that code on the same raw LIBERO observation).
* ``metaworld`` and ``aloha`` -- vla-eval 0.8.0 has no Meta-World or ALOHA benchmark, so these
  follow the documented convention above (which arena layout key becomes which vla-eval key is
  listed on each class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from arena.images import to_uint8
from arena.policies.adapters import EmbodimentAdapter, ProtocolViolation
from arena.rotations import quat_to_axis_angle

__all__ = [
    "VlaEvalAdapter",
    "VlaEvalAlohaAdapter",
    "VlaEvalLiberoAdapter",
    "VlaEvalMetaWorldAdapter",
    "matrix_to_quat",
    "quat_to_axisangle",
    "quat_to_axisangle_robosuite",
]


def _image(observation: dict[str, Any], key: str, env_id: int) -> np.ndarray:
    cams = observation.get("camera_obs") or {}
    if key not in cams:
        raise KeyError(f"observation has no camera_obs['{key}'] (turn on the environment's cameras)")
    return to_uint8(np.asarray(cams[key][env_id]), f"camera_obs['{key}']")


def _state(observation: dict[str, Any], key: str, env_id: int) -> np.ndarray:
    policy = observation.get("policy") or {}
    if key not in policy:
        raise KeyError(f"observation has no policy['{key}']")
    return np.asarray(policy[key][env_id])


class VlaEvalAdapter(EmbodimentAdapter):
    """Base: observation params, the request and the one-action reply.

    Subclasses set ``action_dim``, ``default_params`` (the params and their defaults, as the
    vla-eval benchmark's constructor has them) and implement :meth:`extract`, which returns
    the env's observation already in vla-eval's layout (without ``task_description``).
    """

    default_params: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.params: dict[str, Any] = dict(self.default_params)

    def configure(self, server_params: dict[str, Any] | None, run_params: dict[str, Any] | None) -> list[str]:
        """Apply the server's ``observation_params``, then the run's (which win).

        Returns the keys this adapter does not know (not applied), for the run's warning.
        """
        self.params = dict(self.default_params)
        unknown: list[str] = []
        for source in (server_params or {}, run_params or {}):
            for key, value in source.items():
                if key in self.default_params:
                    self.params[key] = value
                elif key not in unknown:
                    unknown.append(key)
        return unknown

    def episode_task(
        self, name: str, env_config: Any, seed: int | None, env_info: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """EPISODE_START's ``task`` for an episode of ``name`` started with ``seed``:
        ``{"name", "seed"}`` by default (no vla-eval benchmark to follow). An adapter of a
        benchmark vla-eval ships sends what that benchmark's client sends (LIBERO does).
        ``env_config`` is the environment's config (``None`` when unknown); ``env_info()``
        returns the env's ``episode_info`` of the episode just reset."""
        task: dict[str, Any] = {"name": name}
        if seed is not None:
            task["seed"] = int(seed)
        return task

    def pack_request(self, extracted: dict[str, Any], instruction: str | None) -> dict[str, Any]:
        """The OBSERVATION payload: ``extracted`` plus ``task_description``."""
        return {**extracted, "task_description": instruction or ""}

    def unpack_actions(self, response: dict[str, Any], key: str = "actions") -> np.ndarray:
        """``float64 (1, action_dim)``: the reply's single action (``(A,)`` or ``(1, A)``).

        Raises:
            ProtocolViolation: no ``actions``, not a finite float array of ``action_dim``
                values, or a chunk of several rows (the server must buffer chunks: set its
                ``chunk_size``).
        """
        if not isinstance(response, dict) or key not in response:
            got = sorted(response) if isinstance(response, dict) else type(response).__name__
            raise ProtocolViolation(f"ACTION payload has no '{key}' (got {got})")
        action = response[key]
        if not isinstance(action, np.ndarray) or action.dtype.kind != "f":
            kind = getattr(action, "dtype", type(action).__name__)
            raise ProtocolViolation(f"'{key}' is {kind}; expected a float array of {self.action_dim} values")
        if action.ndim == 2 and action.shape[0] > 1:
            raise ProtocolViolation(
                f"'{key}' is a chunk of {action.shape[0]} rows; a vla-eval server answers one action per observation "
                "(start the model server with chunk_size set so it buffers its chunks)"
            )
        if action.size != self.action_dim or action.ndim not in (1, 2):
            raise ProtocolViolation(f"'{key}' has shape {tuple(action.shape)}; expected ({self.action_dim},)")
        if not np.all(np.isfinite(action)):
            raise ProtocolViolation(f"'{key}' holds NaN or infinite values")
        return self.postprocess(np.array(action, np.float64).reshape(1, self.action_dim))

    def postprocess(self, action: np.ndarray) -> np.ndarray:
        """What the vla-eval benchmark does to the action before its simulator (default: nothing)."""
        return action

    def pack_actions(self, actions: np.ndarray, key: str = "actions") -> dict[str, Any]:
        """The model's reply for one env action ``(1, action_dim)`` (the inverse of
        :meth:`unpack_actions` for actions :meth:`postprocess` keeps)."""
        chunk = np.asarray(actions, np.float64)
        if chunk.shape != (1, self.action_dim):
            raise ValueError(f"actions must have shape (1, {self.action_dim}), got {chunk.shape}")
        return {key: chunk[0].astype(np.float32)}


class VlaEvalMetaWorldAdapter(VlaEvalAdapter):
    """Meta-World (Sawyer; arena's ``metaworld`` environment), by vla-eval's convention::

        images            {CAMERA: uint8 (S, S, 3)}   every camera_obs the env renders, as
                                                       rendered (``upright`` applies there)
        states            float64 (39,)               policy.state (send_state, default on)
        task_description  str                         arena's Meta-World instruction

    Reply: ``actions (4,)``: end-effector xyz delta and gripper effort in [-1, 1].
    """

    action_dim: ClassVar[int] = 4
    default_params: ClassVar[dict[str, Any]] = {"send_state": True}

    def extract(self, observation: dict[str, Any], env_id: int) -> dict[str, Any]:
        cams = observation.get("camera_obs") or {}
        out: dict[str, Any] = {"images": {name: _image(observation, name, env_id) for name in cams}}
        if self.params.get("send_state"):
            out["states"] = np.asarray(_state(observation, "state", env_id), np.float64).reshape(-1)
        return out


def quat_to_axisangle(quat: np.ndarray) -> np.ndarray:
    """vla-eval's ``vla_eval.rotation.quat_to_axisangle`` (0.8.0): quaternion ``(x, y, z, w)``
    -> axis-angle ``float32 (3,)``, the quaternion first flipped to ``w >= 0`` (antipodal
    normalization), ``w`` clipped to [-1, 1], zero when ``sqrt(1 - w^2) < 1e-8``."""
    q = np.asarray(quat)
    q = -q if q[3] < 0 else q.copy()
    w = float(np.clip(q[3], -1.0, 1.0))
    sin_half = np.sqrt(1.0 - w * w)
    if sin_half < 1e-8:
        return np.zeros(3, dtype=np.float32)
    angle = 2.0 * np.arccos(w)
    return (q[:3] / sin_half * angle).astype(np.float32)


def matrix_to_quat(mat: np.ndarray) -> np.ndarray:
    """vla-eval's ``vla_eval.rotation.matrix_to_quat`` (0.8.0, ``rotation.py`` l.100-120): a
    3x3 rotation matrix -> quaternion ``(x, y, z, w)`` float64 by Shepperd's method."""
    m = np.asarray(mat, dtype=np.float64)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = 2.0 * np.sqrt(tr + 1.0)
        w, x = 0.25 * s, (m[2, 1] - m[1, 2]) / s
        y, z = (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        w, x = (m[2, 1] - m[1, 2]) / s, 0.25 * s
        y, z = (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = 2.0 * np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2])
        w, x = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s
        y, z = 0.25 * s, (m[1, 2] + m[2, 1]) / s
    else:
        s = 2.0 * np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1])
        w, x = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s
        y, z = (m[1, 2] + m[2, 1]) / s, 0.25 * s
    return np.array([x, y, z, w])


def quat_to_axisangle_robosuite(quat: np.ndarray) -> np.ndarray:
    """vla-eval's LIBERO ``_quat_to_axisangle_robosuite`` (``quat_no_antipodal: true``):
    robosuite's formula without the flip (:func:`arena.rotations.quat_to_axis_angle`, computed
    in the quaternion's own dtype as vla-eval does), ``float32 (3,)``."""
    return quat_to_axis_angle(quat, np.asarray(quat).dtype).astype(np.float32)


class VlaEvalLiberoAdapter(VlaEvalAdapter):
    """LIBERO (arena's ``libero`` environment) as vla-eval's ``LIBEROBenchmark`` sends it::

        images/agentview   uint8 (S, S, 3)   agentview_rgb flipped on both axes ([::-1, ::-1])
        images/wrist       uint8 (S, S, 3)   eye_in_hand_rgb, flipped   (send_wrist_image)
        states             float64 (8,)      eef_pos (3), axis-angle of eef_quat (3, float32
                                             precision), gripper_qpos (2)      (send_state)
        task_description   str               the task's language

    vla-eval renders LIBERO at 256 x 256 (``LIBERO_ENV_RESOLUTION``) and sends it unresized:
    set the environment's ``image_size: 256`` for the same pixels. With ``send_state`` it also
    sends ``controller_states`` float32 (8,) as ``make_obs`` does (l.284-292; read by X-VLA):
    the OSC controller's end-effector position, the axis-angle of its orientation matrix
    (:func:`matrix_to_quat` then :func:`quat_to_axisangle`) and gripper_qpos, all in float32,
    from arena's ``policy.controller_eef_pos`` / ``controller_eef_ori_mat`` (row-major). EPISODE_START's ``task``
    is what vla-eval's LIBERO client sends (:meth:`episode_task`). Actions ``(7,)``: its ``step`` binarizes the gripper (``< 0`` -> -1, else
    +1) before LIBERO sees it, and so does :meth:`postprocess`.
    """

    action_dim: ClassVar[int] = 7
    default_params: ClassVar[dict[str, Any]] = {"send_wrist_image": False, "send_state": False, "quat_no_antipodal": False}

    def extract(self, observation: dict[str, Any], env_id: int) -> dict[str, Any]:
        images = {"agentview": np.ascontiguousarray(_image(observation, "agentview_rgb", env_id)[::-1, ::-1])}
        if self.params.get("send_wrist_image"):
            images["wrist"] = np.ascontiguousarray(_image(observation, "eye_in_hand_rgb", env_id)[::-1, ::-1])
        out: dict[str, Any] = {"images": images}
        if self.params.get("send_state"):
            to_aa = quat_to_axisangle_robosuite if self.params.get("quat_no_antipodal") else quat_to_axisangle
            out["states"] = np.concatenate(
                [
                    _state(observation, "eef_pos", env_id),
                    to_aa(_state(observation, "eef_quat", env_id)),
                    _state(observation, "gripper_qpos", env_id),
                ]
            )
            ori = np.asarray(_state(observation, "controller_eef_ori_mat", env_id), np.float32).reshape(3, 3)
            out["controller_states"] = np.concatenate(
                [
                    np.asarray(_state(observation, "controller_eef_pos", env_id), np.float32),
                    quat_to_axisangle(matrix_to_quat(ori)),
                    np.asarray(_state(observation, "gripper_qpos", env_id), np.float32),
                ]
            )
        return out

    def episode_task(
        self, name: str, env_config: Any, seed: int | None, env_info: Callable[[], dict[str, Any]]
    ) -> dict[str, Any]:
        """``{"name", "suite", "task_id", "episode_idx"}`` as vla-eval 0.8.0 sends them:
        ``LIBEROBenchmark.get_tasks`` (``benchmarks/libero/benchmark.py`` l.162-176) gives
        ``name`` (the task's language), ``suite`` and ``task_id``; the orchestrator adds
        ``episode_idx`` (``orchestrator.py`` l.429-434), the index of the init state the episode
        starts from (``reset``, l.209-210); ``SyncEpisodeRunner.run_episode``
        (``runners/sync_runner.py`` l.44-45) keeps the str/int/float/bool/list fields (not
        ``task_obj``). arena's LIBERO env starts an episode from init state ``seed`` mod 50 and
        reports it as ``init_state`` in its ``episode_info``. Without a LIBERO config (an env
        of another type) the default ``{"name", "seed"}`` is sent."""
        suite, task_id = getattr(env_config, "suite", None), getattr(env_config, "task", None)
        if not isinstance(suite, str) or not isinstance(task_id, int):
            return super().episode_task(name, env_config, seed, env_info)
        index = env_info().get("init_state")
        if not isinstance(index, int):
            index = 0 if seed is None else int(seed) % 50
        return {"name": name, "suite": suite, "task_id": task_id, "episode_idx": index}

    def postprocess(self, action: np.ndarray) -> np.ndarray:
        out = action.copy()
        out[:, -1] = np.where(out[:, -1] < 0, -1.0, 1.0)
        return out


#: arena's ALOHA camera keys (``camera_obs/<name>_rgb``) -> vla-eval image names, in order.
ALOHA_CAMERAS = ("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")


class VlaEvalAlohaAdapter(VlaEvalAdapter):
    """Bimanual ALOHA (arena's ``aloha`` environment), by vla-eval's convention::

        images            {"cam_high": uint8 (H, W, 3), ...}   every ALOHA camera the env
                                                               renders (cam_high required;
                                                               cam_low, cam_left_wrist,
                                                               cam_right_wrist when present),
                                                               native size
        states            float64 (14,)   policy.joint_pos, left arm then right: 6 joints +
                                          gripper each                 (send_state, default on)
        task_description  str

    Reply: ``actions (14,)``, absolute joint targets in the same layout.
    """

    action_dim: ClassVar[int] = 14
    default_params: ClassVar[dict[str, Any]] = {"send_state": True}

    def extract(self, observation: dict[str, Any], env_id: int) -> dict[str, Any]:
        cams = observation.get("camera_obs") or {}
        images = {name: _image(observation, f"{name}_rgb", env_id) for name in ALOHA_CAMERAS if f"{name}_rgb" in cams}
        if "cam_high" not in images:
            raise KeyError("the vla_eval aloha adapter needs camera_obs['cam_high_rgb']")
        out: dict[str, Any] = {"images": images}
        if self.params.get("send_state"):
            out["states"] = np.asarray(_state(observation, "joint_pos", env_id), np.float64).reshape(14)
        return out
