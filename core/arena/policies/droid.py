"""The DROID embodiment in openpi's request format, shared by every plugin that drives a DROID
model: the openpi plugin registers :class:`OpenPIDroidAdapter` as ``openpi/droid`` (Franka
kitchen's layout), and the ManiSkill plugin derives its ``openpi/maniskill_droid`` adapter from
it (the same request, read from ManiSkill's Panda). It lives in core because a plugin never
imports another (docs/writing-a-plugin.md).

Arena-layout observation the adapter reads (``N = num_envs``; ``franka_kitchen`` provides it)::

    camera_obs/external_camera_rgb   uint8 (N, H, W, 3)
    camera_obs/wrist_camera_rgb      uint8 (N, H, W, 3)
    policy/joint_pos                 float (N, 7)     rad
    policy/gripper_pos               float (N, 1)     0 open ... 1 closed

Facts: openpi ``examples/droid/main.py`` (the request) and the openpi training configs (the
chunk lengths), ``reference/protocols.md`` section 2.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from arena.images import resize_with_pad, to_uint8
from arena.policies.adapters import EmbodimentAdapter

__all__ = ["IMAGE_SIZE", "DroidFrame", "OpenPIAdapter", "OpenPIDroidAdapter", "camera_image"]

#: Side of the square images openpi's examples send (the server resizes to this size too).
IMAGE_SIZE = 224


class OpenPIAdapter(EmbodimentAdapter):
    """Base of the openpi adapters: adds the per-variant chunk length and open-loop horizon.

    openpi's metadata does not state the chunk length (``reference/protocols.md`` section
    2.2), so each adapter keeps the ``action_horizon`` of the openpi training configs its
    checkpoints were trained with (openpi ``src/openpi/training/config.py`` and
    ``training/misc/polaris_config.py`` at 15a9616; ``Pi0Config`` defaults to 50).
    """

    #: ``policy_variant -> rows of every action chunk the checkpoint returns``.
    chunk_length_by_variant: ClassVar[dict[str, int]] = {}
    #: ``policy_variant -> rows of each chunk replayed before the next request``.
    open_loop_horizon_by_variant: ClassVar[dict[str, int]] = {}


def camera_image(observation: dict[str, Any], key: str, env_id: int) -> np.ndarray:
    """Env ``env_id``'s camera ``key`` as uint8 (:func:`arena.images.to_uint8`: floats in [0, 1]
    converted, anything that would wrap around refused with ObservationError)."""
    return to_uint8(observation["camera_obs"][key][env_id], f"camera_obs['{key}']")


# -- DROID ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DroidFrame:
    """One env's DROID inputs, as read from the observation (native sizes)."""

    exterior_image: np.ndarray
    wrist_image: np.ndarray
    joint_position: np.ndarray
    gripper_position: np.ndarray


class OpenPIDroidAdapter(OpenPIAdapter):
    """Franka DROID for the ``pi0_droid_jointpos`` / ``pi05_droid_jointpos`` checkpoints.

    Request (openpi ``examples/droid/main.py``)::

        observation/exterior_image_1_left  uint8 (224, 224, 3)   resize-with-pad
        observation/wrist_image_left       uint8 (224, 224, 3)   resize-with-pad
        observation/joint_position         float64 (7,)          rad
        observation/gripper_position       float64 (1,)          0 open ... 1 closed
        prompt                             str

    Reply: ``actions (H, 8)``: 7 absolute joint positions + gripper (the joint-position
    checkpoints; H = 15 for pi05, 10 for pi0, all of which are replayed).
    """

    action_dim: ClassVar[int] = 8
    #: pi05_droid_jointpos_polaris: action_horizon=15; pi0_droid_jointpos_polaris: 10.
    chunk_length_by_variant: ClassVar[dict[str, int]] = {"pi05": 15, "pi0": 10}
    open_loop_horizon_by_variant: ClassVar[dict[str, int]] = {"pi05": 15, "pi0": 10}

    def extract(self, observation: dict[str, Any], env_id: int) -> DroidFrame:
        return DroidFrame(
            exterior_image=camera_image(observation, "external_camera_rgb", env_id),
            wrist_image=camera_image(observation, "wrist_camera_rgb", env_id),
            joint_position=np.asarray(observation["policy"]["joint_pos"][env_id]),
            gripper_position=np.asarray(observation["policy"]["gripper_pos"][env_id]),
        )

    def pack_request(self, extracted: DroidFrame, instruction: str | None) -> dict[str, Any]:
        return {
            "observation/exterior_image_1_left": resize_with_pad(
                to_uint8(extracted.exterior_image), IMAGE_SIZE, IMAGE_SIZE
            ),
            "observation/wrist_image_left": resize_with_pad(to_uint8(extracted.wrist_image), IMAGE_SIZE, IMAGE_SIZE),
            "observation/joint_position": np.asarray(extracted.joint_position, np.float64).reshape(7),
            "observation/gripper_position": np.asarray(extracted.gripper_position, np.float64).reshape(1),
            "prompt": instruction or "",
        }
