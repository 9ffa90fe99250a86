"""GR00T embodiment adapters: Arena-layout observations -> GR00T observations, replies -> actions.

An adapter is built from the server's modality config (``get_modality_config``), so the keys
and horizons sent are the ones the model reads (``reference/isaaclab-arena.md`` section 4.1):

* N1.6 (nested, batched)::

      {"video":    {key: uint8 (N, T_v, H, W, 3)},     # letterboxed to target_image_size
       "state":    {key: float32 (N, T_s, D)},
       "language": {key: [[instruction]] * N}}

* flat (N1.5, and N1.6 behind ``--use-sim-policy-wrapper``): ``video.<key>``,
  ``state.<key>`` with the same arrays, and the language key mapped to ``[instruction] * N``
  (Isaac-GR00T ``gr00t/policy/gr00t_policy.py``, ``Gr00tSimPolicyWrapper``).

Keys may arrive bare (``joint_position``, N1.6) or prefixed (``state.joint_position``, N1.5);
both are understood. Replies map action groups (``joint_position`` or
``action.joint_position``: ``(N, T_a, d)``) back into the simulator's action slots.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from arena.policies.adapters import ProtocolViolation

from arena_gr00t.codec import ModalityConfig
from arena.errors import ObservationError
from arena.images import letterbox, to_uint8

__all__ = ["DROID_MODALITY", "Gr00tAdapter", "Gr00tDroidAdapter", "UnsupportedModality"]


class UnsupportedModality(ProtocolViolation):
    """The server's modality config names a key this adapter cannot fill or read."""


#: GR00T N1.6-DROID as arena's test double serves it (used when a server sends ``{}``).
DROID_MODALITY: dict[str, ModalityConfig] = {
    "video": ModalityConfig((0,), ("exterior_image_1_left", "wrist_image_left")),
    "state": ModalityConfig((0,), ("joint_position", "gripper_position")),
    "action": ModalityConfig(tuple(range(32)), ("joint_position", "gripper_position")),
    "language": ModalityConfig((0,), ("annotation.language.language_instruction",)),
}


def _bare(key: str, prefix: str) -> str:
    return key[len(prefix) + 1 :] if key.startswith(prefix + ".") else key


class Gr00tAdapter:
    """Base of GR00T adapters. Subclasses fill the four class tables below.

    ``cameras``: video key -> Arena camera name; ``states``: state key -> (Arena
    ``obs["policy"]`` name or ``None`` for zeros, width); ``actions``: action group ->
    slice of the simulator's action; ``hold``: Arena ``obs["policy"]`` names whose
    concatenation is the action that holds the robot still (for ``synced_batch``).
    """

    action_dim: ClassVar[int] = 0
    cameras: ClassVar[dict[str, str]] = {}
    states: ClassVar[dict[str, tuple[str | None, int]]] = {}
    actions: ClassVar[dict[str, slice]] = {}
    hold: ClassVar[tuple[str, ...]] = ()

    def __init__(self, modality: dict[str, ModalityConfig] | None = None, target_image_size: tuple[int, int] = (180, 320)) -> None:
        """Check that every key of ``modality`` is known.

        Raises:
            UnsupportedModality: a video, state or action key this adapter does not know,
                or no language key.
        """
        self.modality = dict(modality or DROID_MODALITY)
        self.target_image_size = tuple(target_image_size)
        for part in ("video", "state", "action", "language"):
            if part not in self.modality:
                raise UnsupportedModality(f"the server's modality config has no '{part}' entry (got {sorted(self.modality)})")
        self.video_keys = list(self.modality["video"].modality_keys)
        self.state_keys = list(self.modality["state"].modality_keys)
        self.action_keys = list(self.modality["action"].modality_keys)
        self.language_keys = list(self.modality["language"].modality_keys)
        unknown = [k for k in self.video_keys if _bare(k, "video") not in self.cameras]
        unknown += [k for k in self.state_keys if _bare(k, "state") not in self.states]
        unknown += [k for k in self.action_keys if _bare(k, "action") not in self.actions]
        if unknown:
            raise UnsupportedModality(
                f"{type(self).__name__} cannot map modality keys {unknown}; it knows video "
                f"{sorted(self.cameras)}, state {sorted(self.states)}, action {sorted(self.actions)}"
            )
        if not self.language_keys:
            raise UnsupportedModality("the server's modality config has no language key")
        self.action_horizon = self.modality["action"].horizon

    # ---- requests -------------------------------------------------------------------------
    def observation(self, obs: dict[str, Any], instruction: str | None, *, flat: bool = False) -> dict[str, Any]:
        """The GR00T observation of every env of the batched Arena ``obs`` (one request).

        A modality with ``T`` > 1 time steps repeats the current frame/state ``T`` times.

        Raises:
            ProtocolViolation: a camera or state the modality needs is missing from ``obs``,
                or an image :func:`arena.images.to_uint8` refuses (float outside [0, 1],
                integers outside 0..255).
        """
        text = instruction or ""
        h, w = self.target_image_size
        video: dict[str, np.ndarray] = {}
        t_v = max(1, self.modality["video"].horizon)
        for key in self.video_keys:
            camera = self.cameras[_bare(key, "video")]
            try:
                images = obs["camera_obs"][camera]
            except KeyError:
                raise ProtocolViolation(f"observation has no camera_obs['{camera}'] for video key '{key}'") from None
            try:
                images = to_uint8(images, f"camera_obs['{camera}']")
            except ObservationError as exc:  # the same refusal as every other adapter's
                raise ProtocolViolation(str(exc)) from None
            boxed = letterbox(images, h, w)[:, None]
            video[key] = np.repeat(boxed, t_v, axis=1) if t_v > 1 else boxed
        num_envs = next(iter(video.values())).shape[0] if video else len(obs["policy"][next(iter(obs["policy"]))])
        state: dict[str, np.ndarray] = {}
        t_s = max(1, self.modality["state"].horizon)
        for key in self.state_keys:
            source, width = self.states[_bare(key, "state")]
            if source is None:
                values = np.zeros((num_envs, width), np.float32)
            else:
                try:
                    values = np.asarray(obs["policy"][source], dtype=np.float32).reshape(num_envs, -1)
                except KeyError:
                    raise ProtocolViolation(f"observation has no policy['{source}'] for state key '{key}'") from None
                if values.shape[1] != width:
                    raise ProtocolViolation(f"policy['{source}'] has {values.shape[1]} values; state '{key}' needs {width}")
            state[key] = np.repeat(values[:, None], t_s, axis=1)
        if flat:
            out: dict[str, Any] = {}
            out.update({k if k.startswith("video.") else f"video.{k}": v for k, v in video.items()})
            out.update({k if k.startswith("state.") else f"state.{k}": v for k, v in state.items()})
            out.update({k: [text] * num_envs for k in self.language_keys})
            return out
        return {
            "video": video,
            "state": state,
            "language": {k: [[text] for _ in range(num_envs)] for k in self.language_keys},
        }

    def hold_action(self, obs: dict[str, Any]) -> np.ndarray:
        """``float32 (N, action_dim)``: the current joint positions and gripper (hold still)."""
        parts = [np.asarray(obs["policy"][name], dtype=np.float32) for name in self.hold]
        n = parts[0].shape[0]
        return np.concatenate([p.reshape(n, -1) for p in parts], axis=1)

    # ---- replies --------------------------------------------------------------------------
    def actions_from_reply(self, reply: dict[str, Any], num_envs: int, min_rows: int) -> np.ndarray:
        """``float32 (N, H, action_dim)`` from the reply's action groups.

        Raises:
            ProtocolViolation: a group is missing, not a float array of shape
                ``(N, H, d)`` with ``H >= min_rows``, or holds NaN/inf.
        """
        groups = {_bare(str(k), "action"): v for k, v in reply.items()}
        rows = None
        out: np.ndarray | None = None
        for key in self.action_keys:
            name = _bare(key, "action")
            slot = self.actions[name]
            width = slot.stop - slot.start
            if name not in groups:
                raise ProtocolViolation(f"reply has no action group '{name}' (got {sorted(groups)})")
            value = groups[name]
            if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
                raise ProtocolViolation(f"action '{name}' is not a float array ({type(value).__name__})")
            if value.ndim == 2 and num_envs == 1:
                value = value[None]
            if value.ndim != 3 or value.shape[0] != num_envs or value.shape[2] != width or value.shape[1] < min_rows:
                raise ProtocolViolation(
                    f"action '{name}' has shape {tuple(value.shape)}; expected ({num_envs}, H>={min_rows}, {width})"
                )
            if rows is None:
                rows = value.shape[1]
                out = np.zeros((num_envs, rows, self.action_dim), np.float32)
            elif value.shape[1] != rows:
                raise ProtocolViolation(f"action groups disagree on the horizon ({rows} vs {value.shape[1]})")
            if not np.all(np.isfinite(value)):
                raise ProtocolViolation(f"action '{name}' holds NaN or infinite values")
            out[:, :, slot] = value
        assert out is not None
        return out


class Gr00tDroidAdapter(Gr00tAdapter):
    """DROID Franka (GR00T ``OXE_DROID``): 7 absolute joint positions + gripper (0 open, 1 closed).

    Cameras: ``exterior_image_1_left`` <- ``external_camera_rgb``, ``exterior_image_2_left`` <-
    ``external_camera_2_rgb``, ``wrist_image_left`` <- ``wrist_camera_rgb``. State:
    ``joint_position`` <- ``policy.joint_pos`` (7), ``gripper_position`` <- ``policy.gripper_pos``
    (1); ``eef_position`` (3) / ``eef_rotation`` (3) are read from ``policy.eef_pos`` /
    ``policy.eef_rot`` when a model asks for them. Actions: ``joint_position`` -> slots 0-6,
    ``gripper_position`` -> slot 7.
    """

    action_dim: ClassVar[int] = 8
    cameras: ClassVar[dict[str, str]] = {
        "exterior_image_1_left": "external_camera_rgb",
        "exterior_image_2_left": "external_camera_2_rgb",
        "wrist_image_left": "wrist_camera_rgb",
    }
    states: ClassVar[dict[str, tuple[str | None, int]]] = {
        "joint_position": ("joint_pos", 7),
        "gripper_position": ("gripper_pos", 1),
        "eef_position": ("eef_pos", 3),
        "eef_rotation": ("eef_rot", 3),
    }
    actions: ClassVar[dict[str, slice]] = {"joint_position": slice(0, 7), "gripper_position": slice(7, 8)}
    hold: ClassVar[tuple[str, ...]] = ("joint_pos", "gripper_pos")
