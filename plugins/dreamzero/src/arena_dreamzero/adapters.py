"""DreamZero embodiment adapters: one env's Arena observation -> a RoboArena request.

DROID request (``reference/protocols.md`` section 4.2; ``reference/isaaclab-arena.md`` 3.3)::

    observation/exterior_image_0_left   uint8 (H, W, 3) or (T, H, W, 3)   <- external_camera_rgb
    observation/exterior_image_1_left   uint8 ...                         <- external_camera_2_rgb
    observation/wrist_image_left        uint8 ...                         <- wrist_camera_rgb
    observation/joint_position          float64 (7,)                      <- policy.joint_pos
    observation/gripper_position        float64 (1,)                      <- policy.gripper_pos
    observation/cartesian_position      float64 (6,) zeros (sent by RoboArena clients; DreamZero ignores it)
    prompt, session_id                  str

Images are letterboxed to the greeting's ``image_resolution`` (180x320 for DreamZero-DROID).
The reply ``(N, 8)`` (7 joint positions + gripper) or ``(N, 7)`` (padded with a zero, i.e.
open, gripper column) is cut to the open-loop horizon.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import numpy as np

from arena.policies.adapters import ProtocolViolation

from arena.errors import ObservationError
from arena.images import letterbox, to_uint8

__all__ = ["DreamZeroAdapter", "DreamZeroDroidAdapter"]

Cam2Source = Literal["right", "black", "duplicate"]


class DreamZeroAdapter:
    """Base of DreamZero adapters: ``frames``, ``state``, ``pack_request``, ``unpack_actions``."""

    action_dim: ClassVar[int] = 0

    def frames(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        """The request's image keys -> env ``env_id``'s current uint8 ``(H, W, 3)`` frame
        (converted by :func:`arena.images.to_uint8`; a refused image raises ProtocolViolation)."""
        raise NotImplementedError

    def state(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        """The request's state keys -> env ``env_id``'s values."""
        raise NotImplementedError

    def pack_request(
        self,
        frames: dict[str, np.ndarray],
        state: dict[str, np.ndarray],
        instruction: str | None,
        session_id: str,
        image_resolution: tuple[int, int] | None,
    ) -> dict[str, Any]:
        """The ``infer`` message (without ``endpoint``): letterboxed frames (``(H, W, 3)`` or a
        ``(T, H, W, 3)`` stack), state, ``prompt`` and ``session_id``."""
        out: dict[str, Any] = {}
        for key, image in frames.items():
            out[key] = letterbox(image, *image_resolution) if image_resolution else np.ascontiguousarray(image)
        out.update(state)
        out["prompt"] = instruction or ""
        out["session_id"] = session_id
        return out

    def unpack_actions(self, reply: np.ndarray, min_rows: int) -> np.ndarray:
        """``float32 (H, action_dim)`` from the reply.

        Raises:
            ProtocolViolation: not a 2-D float array with ``action_dim`` (or ``action_dim - 1``)
                columns and at least ``min_rows`` rows, or NaN/inf.
        """
        if reply.dtype.kind != "f" or reply.ndim != 2 or reply.shape[1] not in (self.action_dim, self.action_dim - 1):
            raise ProtocolViolation(
                f"DreamZero reply has dtype {reply.dtype} shape {tuple(reply.shape)}; expected float "
                f"(H, {self.action_dim}) or (H, {self.action_dim - 1})"
            )
        if reply.shape[0] < min_rows:
            raise ProtocolViolation(f"DreamZero reply has {reply.shape[0]} rows; the open-loop horizon needs {min_rows}")
        if not np.all(np.isfinite(reply)):
            raise ProtocolViolation("DreamZero reply holds NaN or infinite values")
        chunk = np.zeros((reply.shape[0], self.action_dim), np.float32)
        chunk[:, : reply.shape[1]] = reply
        return chunk


class DreamZeroDroidAdapter(DreamZeroAdapter):
    """DROID Franka: 7 absolute joint positions + gripper (0 open ... 1 closed).

    ``cam2_source`` sets the second exterior image: ``right`` (``external_camera_2_rgb``),
    ``black`` (zeros) or ``duplicate`` (the first exterior camera again).
    """

    action_dim: ClassVar[int] = 8
    cameras: ClassVar[dict[str, str]] = {
        "observation/exterior_image_0_left": "external_camera_rgb",
        "observation/exterior_image_1_left": "external_camera_2_rgb",
        "observation/wrist_image_left": "wrist_camera_rgb",
    }

    def __init__(self, cam2_source: Cam2Source = "right") -> None:
        self.cam2_source = cam2_source

    def frames(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        cams = observation.get("camera_obs", {})
        out: dict[str, np.ndarray] = {}
        for key, name in self.cameras.items():
            if key == "observation/exterior_image_1_left" and self.cam2_source != "right":
                continue
            if name not in cams:
                raise ProtocolViolation(f"observation has no camera_obs['{name}'] (needed for {key})")
            try:
                image = to_uint8(cams[name][env_id], f"camera_obs['{name}']")
            except ObservationError as exc:  # the same refusal as every other adapter's
                raise ProtocolViolation(str(exc)) from None
            if image.ndim != 3:
                raise ProtocolViolation(f"camera_obs['{name}'] must be (H, W, 3) per env; got shape {image.shape}")
            out[key] = image
        first = out["observation/exterior_image_0_left"]
        if self.cam2_source == "black":
            out["observation/exterior_image_1_left"] = np.zeros_like(first)
        elif self.cam2_source == "duplicate":
            out["observation/exterior_image_1_left"] = first
        return out

    def state(self, observation: dict[str, Any], env_id: int) -> dict[str, np.ndarray]:
        policy = observation.get("policy", {})
        try:
            joints = np.asarray(policy["joint_pos"][env_id], dtype=np.float64).reshape(-1)
            gripper = np.asarray(policy["gripper_pos"][env_id], dtype=np.float64).reshape(-1)
        except KeyError as exc:
            raise ProtocolViolation(f"observation has no policy[{exc.args[0]!r}]") from None
        if joints.shape != (7,) or gripper.shape != (1,):
            raise ProtocolViolation(f"DROID needs 7 joint positions and 1 gripper value; got {joints.shape} and {gripper.shape}")
        return {
            "observation/joint_position": joints,
            "observation/gripper_position": gripper,
            "observation/cartesian_position": np.zeros(6, np.float64),
        }
