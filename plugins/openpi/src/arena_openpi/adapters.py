"""openpi embodiment adapters (family ``"openpi"``): ``droid``, ``libero``, ``aloha``.

Each sends exactly what openpi's public example clients send for that config (keys, dtypes,
224 x 224 resize-with-pad; ``reference/protocols.md`` section 2.5) and declares the chunk
rows replayed per request for each ``policy_variant`` (``open_loop_horizon_by_variant``).

Arena-layout observations each adapter reads (``N = num_envs``):

``droid`` (:mod:`arena.policies.droid`, in core: the ManiSkill plugin builds on it; the
``franka_kitchen`` environment provides these)::

    camera_obs/external_camera_rgb   uint8 (N, H, W, 3)
    camera_obs/wrist_camera_rgb      uint8 (N, H, W, 3)
    policy/joint_pos                 float (N, 7)     rad
    policy/gripper_pos               float (N, 1)     0 open ... 1 closed

``libero`` (no bundled simulator; the keys a LIBERO environment must provide)::

    camera_obs/agentview_rgb         uint8 (N, H, W, 3)   as LIBERO renders it (upside down)
    camera_obs/eye_in_hand_rgb       uint8 (N, H, W, 3)   as LIBERO renders it (upside down)
    policy/eef_pos                   float (N, 3)     m
    policy/eef_quat                  float (N, 4)     (x, y, z, w), robosuite order
    policy/gripper_qpos              float (N, 2)     m, the two finger joints

``aloha`` (no bundled simulator; the keys an ALOHA environment must provide)::

    camera_obs/cam_high_rgb          uint8 (N, H, W, 3)   required
    camera_obs/cam_low_rgb, cam_left_wrist_rgb, cam_right_wrist_rgb   optional, same shape
    policy/joint_pos                 float (N, 14)    both arms: 6 joints + gripper each
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from arena.images import resize_with_pad, to_uint8

# openpi's _quat2axisangle (examples/libero/main.py 199-214 at 15a9616) is robosuite's formula,
# which the vla_eval plugin's LIBERO adapters use too.
from arena.rotations import quat_to_axis_angle

# The openpi adapter base, its image size and the DROID adapter are shared with the ManiSkill
# plugin, so they live in core (arena.policies.droid); imported here under their names.
from arena.policies.droid import IMAGE_SIZE, DroidFrame, OpenPIAdapter, OpenPIDroidAdapter
from arena.policies.droid import camera_image as _image

__all__ = [
    "ALOHA_CAMERAS", "IMAGE_SIZE", "AlohaFrame", "DroidFrame", "LiberoFrame", "OpenPIAdapter",
    "OpenPIAlohaAdapter", "OpenPIDroidAdapter", "OpenPILiberoAdapter", "quat_to_axis_angle",
]


# -- LIBERO ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiberoFrame:
    """One env's LIBERO inputs (images as rendered, state parts)."""

    agentview: np.ndarray
    eye_in_hand: np.ndarray
    eef_pos: np.ndarray
    eef_quat: np.ndarray
    gripper_qpos: np.ndarray


class OpenPILiberoAdapter(OpenPIAdapter):
    """LIBERO (Franka, robosuite) for the ``pi0_libero`` / ``pi05_libero`` checkpoints.

    Request (openpi ``examples/libero/main.py``)::

        observation/image        uint8 (224, 224, 3)   agentview, rotated 180 degrees, resize-with-pad
        observation/wrist_image  uint8 (224, 224, 3)   eye-in-hand, rotated 180 degrees, resize-with-pad
        observation/state        float64 (8,)          eef position (3), axis-angle (3), gripper qpos (2)
        prompt                   str

    Reply: ``actions (H, 7)`` (end-effector delta + gripper; H = 10 for pi05, 50 for pi0); the
    example replays 5 rows per request, so both variants replay 5.
    """

    action_dim: ClassVar[int] = 7
    #: pi05_libero: action_horizon=10; pi0_libero: the Pi0Config default, 50.
    chunk_length_by_variant: ClassVar[dict[str, int]] = {"pi05": 10, "pi0": 50}
    open_loop_horizon_by_variant: ClassVar[dict[str, int]] = {"pi05": 5, "pi0": 5}

    def extract(self, observation: dict[str, Any], env_id: int) -> LiberoFrame:
        policy = observation["policy"]
        return LiberoFrame(
            agentview=_image(observation, "agentview_rgb", env_id),
            eye_in_hand=_image(observation, "eye_in_hand_rgb", env_id),
            eef_pos=np.asarray(policy["eef_pos"][env_id]),
            eef_quat=np.asarray(policy["eef_quat"][env_id]),
            gripper_qpos=np.asarray(policy["gripper_qpos"][env_id]),
        )

    def pack_request(self, extracted: LiberoFrame, instruction: str | None) -> dict[str, Any]:
        # LIBERO renders upside down; the checkpoints were trained on the rotated images.
        image = np.ascontiguousarray(to_uint8(extracted.agentview)[::-1, ::-1])
        wrist = np.ascontiguousarray(to_uint8(extracted.eye_in_hand)[::-1, ::-1])
        state = np.concatenate(
            [
                np.asarray(extracted.eef_pos, np.float64).reshape(3),
                quat_to_axis_angle(extracted.eef_quat),
                np.asarray(extracted.gripper_qpos, np.float64).reshape(2),
            ]
        )
        return {
            "observation/image": resize_with_pad(image, IMAGE_SIZE, IMAGE_SIZE),
            "observation/wrist_image": resize_with_pad(wrist, IMAGE_SIZE, IMAGE_SIZE),
            "observation/state": state,
            "prompt": instruction or "",
        }


# -- ALOHA ----------------------------------------------------------------------------------

#: ALOHA camera names the openpi ALOHA configs accept, in request order.
ALOHA_CAMERAS = ("cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist")


@dataclass(frozen=True)
class AlohaFrame:
    """One env's ALOHA inputs: the cameras present (HWC, native size) and the 14-dim state."""

    images: dict[str, np.ndarray]
    state: np.ndarray


class OpenPIAlohaAdapter(OpenPIAdapter):
    """Bimanual ALOHA for the ``pi0_aloha_sim`` / ``pi0_aloha*`` checkpoints.

    Request (openpi ``examples/aloha_sim`` and ``examples/aloha_real``)::

        state    float64 (14,)
        images   {"cam_high": uint8 (3, 224, 224), ...}   CHW, resize-with-pad; cam_low,
                                                         cam_left_wrist, cam_right_wrist when present
        prompt   str

    Reply: ``actions (50, 14)``; the examples replay 10 rows per chunk.
    """

    action_dim: ClassVar[int] = 14
    #: pi0_aloha_sim and pi05_aloha: the Pi0Config default, 50.
    chunk_length_by_variant: ClassVar[dict[str, int]] = {"pi0": 50, "pi05": 50}
    open_loop_horizon_by_variant: ClassVar[dict[str, int]] = {"pi0": 10, "pi05": 10}

    def extract(self, observation: dict[str, Any], env_id: int) -> AlohaFrame:
        cameras = observation["camera_obs"]
        images = {name: _image(observation, f"{name}_rgb", env_id) for name in ALOHA_CAMERAS if f"{name}_rgb" in cameras}
        if "cam_high" not in images:
            raise KeyError("the aloha adapter needs camera_obs['cam_high_rgb']")
        return AlohaFrame(images=images, state=np.asarray(observation["policy"]["joint_pos"][env_id]))

    def pack_request(self, extracted: AlohaFrame, instruction: str | None) -> dict[str, Any]:
        images = {
            name: np.ascontiguousarray(
                resize_with_pad(to_uint8(image), IMAGE_SIZE, IMAGE_SIZE).transpose(2, 0, 1)
            )
            for name, image in extracted.images.items()
        }
        return {
            "state": np.asarray(extracted.state, np.float64).reshape(14),
            "images": images,
            "prompt": instruction or "",
        }
