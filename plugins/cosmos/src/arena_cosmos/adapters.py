"""Cosmos embodiment adapter (family ``"cosmos"``): ``droid``.

Reads the DROID Arena layout (the ``franka_kitchen`` environment provides it)::

    camera_obs/external_camera_rgb    uint8 (N, H, W, 3)   exterior, over the left shoulder
    camera_obs/external_camera_2_rgb  uint8 (N, H, W, 3)   exterior, over the right shoulder
    camera_obs/wrist_camera_rgb       uint8 (N, H, W, 3)
    policy/joint_pos                  float (N, 7)         rad
    policy/gripper_pos                float (N, 1)         0 open ... 1 closed

and sends the request of Cosmos3-Edge-Policy-DROID's robolab server (the client composes
the view; ``reference/isaaclab-arena.md`` section 3.2, matching RoboLab's cosmos3 client)::

    observation/image              uint8 (540, 640, 3)   wrist view (360 x 640) on top, the
                                                         two exterior views (180 x 320 each)
                                                         side by side below, left then right
    observation/joint_position     float32 (7,)
    observation/gripper_position   float32 (1,)
    prompt                         str

Each camera image is first resized with padding to 360 x 640; the exterior views are then
halved. Reply: ``action (32, 8)``, joint positions + gripper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from arena.policies.adapters import EmbodimentAdapter
from arena.images import half_size, resize_with_pad, to_uint8


@dataclass(frozen=True)
class CosmosDroidFrame:
    """One env's inputs at native size."""

    wrist_image: np.ndarray
    exterior_image_1: np.ndarray
    exterior_image_2: np.ndarray
    joint_position: np.ndarray
    gripper_position: np.ndarray


class CosmosDroidAdapter(EmbodimentAdapter):
    """Franka DROID for Cosmos3-Edge-Policy-DROID (see the module docstring for the wire format)."""

    action_dim: ClassVar[int] = 8
    #: Size every camera is resized (with padding) to before composing.
    IMAGE_H: ClassVar[int] = 360
    IMAGE_W: ClassVar[int] = 640
    #: Shape of the composed ``observation/image``.
    COMPOSED_SHAPE: ClassVar[tuple[int, int, int]] = (540, 640, 3)

    def extract(self, observation: dict[str, Any], env_id: int) -> CosmosDroidFrame:
        cams = observation["camera_obs"]

        def image(key: str) -> np.ndarray:  # uint8 through arena's one conversion (never wrapped)
            return to_uint8(cams[key][env_id], f"camera_obs['{key}']")

        return CosmosDroidFrame(
            wrist_image=image("wrist_camera_rgb"),
            exterior_image_1=image("external_camera_rgb"),
            exterior_image_2=image("external_camera_2_rgb"),
            joint_position=np.asarray(observation["policy"]["joint_pos"][env_id]),
            gripper_position=np.asarray(observation["policy"]["gripper_pos"][env_id]),
        )

    def compose(self, frame: CosmosDroidFrame) -> np.ndarray:
        """The combined ``uint8 (540, 640, 3)`` view: wrist on top, exteriors halved below."""
        h, w = self.IMAGE_H, self.IMAGE_W
        wrist = resize_with_pad(to_uint8(frame.wrist_image), h, w)
        left = half_size(resize_with_pad(to_uint8(frame.exterior_image_1), h, w))
        right = half_size(resize_with_pad(to_uint8(frame.exterior_image_2), h, w))
        return np.concatenate([wrist, np.concatenate([left, right], axis=1)], axis=0)

    def pack_request(self, extracted: CosmosDroidFrame, instruction: str | None) -> dict[str, Any]:
        return {
            "observation/image": self.compose(extracted),
            "observation/joint_position": np.asarray(extracted.joint_position, np.float32).reshape(7),
            "observation/gripper_position": np.asarray(extracted.gripper_position, np.float32).reshape(1),
            "prompt": instruction or "",
        }
