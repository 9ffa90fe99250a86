"""DROID-like models on a ManiSkill Panda: the ``maniskill_droid`` embodiment adapter (openpi).

DROID policies read two Franka cameras (one exterior, one on the wrist), the 7 arm joints and
the gripper (0 open ... 1 closed), and answer ``(H, 8)`` chunks. ManiSkill's Panda is that
robot (same arm, 7 joints; a parallel gripper instead of the Robotiq); with
``robot: panda_wristcam`` it carries a wrist camera (``hand_camera``) beside the task's
``base_camera``. Which ManiSkill controller serves which DROID action space
(``reference/protocols.md`` sections 2.5 and 4.1: openpi's ``pi05_droid`` / ``pi0_droid`` /
``pi0_fast_droid`` answer 7 joint *velocities* + gripper; the ``*_droid_jointpos`` checkpoints
arena's openpi ``droid`` adapter targets, GR00T N1.6-DROID and DreamZero answer 7 absolute
joint *positions* + gripper; RoboArena's handshake names four spaces)::

    DROID action space      ManiSkill control_mode   arm part of the action
    joint_position          pd_joint_pos             7 absolute targets, rad (as sent)
    joint_velocity          pd_joint_vel             7 joint velocities, rad/s, clipped to +-1
    cartesian_velocity      pd_ee_delta_pose         end-effector delta xyz + rotation, normalized
                                                     to [-1, 1] = +-0.1 m / +-0.1 rad per step
    cartesian_position      pd_ee_pose               absolute end-effector pose

and in every mode the gripper: DROID ``g`` (0 open ... 1 closed) is ManiSkill's ``1 - 2 g``
(+1 open, finger target 0.04 m ... -1 closed, target -0.01 m: ``PDJointPosMimicController``
with ``lower=-0.01, upper=0.04``, normalized; mani-skill 3.0.1 ``agents/robots/panda/panda.py``).
This module implements the first row, the one arena's DROID adapters speak (openpi ``droid``,
GR00T ``droid``, Cosmos ``droid``, DreamZero: all joint positions): :class:`ManiSkillDroidAdapter`
is openpi's DROID adapter (:class:`arena.policies.droid.OpenPIDroidAdapter`, in core so
that no plugin imports another) reading the ``maniskill``
environment's layout instead of ``franka_kitchen``'s, and the run must use
``control_mode: pd_joint_pos`` (a joint-position chunk read as end-effector deltas would
be meaningless; the remote policy's ``validate_run`` cannot see the adapter's needs, so the
env refuses a width it does not take, and the README says which mode).

Observation read (the ``maniskill`` environment, ``obs_mode: rgb``, ``robot: panda_wristcam``)::

    camera_obs/base_camera_rgb   uint8 (N, H, W, 3)   -> observation/exterior_image_1_left
    camera_obs/hand_camera_rgb   uint8 (N, H, W, 3)   -> observation/wrist_image_left
    policy/qpos                  float (N, 9)         7 arm joints (rad) + 2 finger joints (m)
        -> observation/joint_position = qpos[:7]
        -> observation/gripper_position = 1 - mean(finger joints) / 0.04, clipped to [0, 1]

:func:`droid_layout` gives the same mapping as an Arena DROID-layout observation (the keys
``franka_kitchen`` provides: ``external_camera_rgb``, ``wrist_camera_rgb``, ``joint_pos``,
``gripper_pos``), which the GR00T, Cosmos and DreamZero DROID adapters read; an environment
option that emits it would let them drive ManiSkill too (their chunks convert with
:func:`maniskill_actions`). The adapter serves arena-plugin-openpi's ``openpi_remote``
policy: the plugin registers it only where that plugin is installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arena.errors import ObservationError
from arena.policies.droid import DroidFrame, OpenPIDroidAdapter

#: The ManiSkill camera each DROID camera is read from.
EXTERIOR_CAMERA, WRIST_CAMERA = "base_camera_rgb", "hand_camera_rgb"
#: Panda finger joint position (m) when open: ``PDJointPosMimicController`` ``upper``.
FINGER_OPEN_M = 0.04
#: ManiSkill control mode -> the DROID action space it serves (module docstring's table).
CONTROL_MODES: dict[str, str] = {
    "pd_joint_pos": "joint_position",
    "pd_joint_vel": "joint_velocity",
    "pd_ee_delta_pose": "cartesian_velocity",
    "pd_ee_pose": "cartesian_position",
}


def gripper_position(qpos: np.ndarray) -> np.ndarray:
    """DROID gripper position ``float64 (N, 1)``, 0 open ... 1 closed, of Panda joints
    ``qpos (N, 9)`` (the two finger joints, m, at 7 and 8)."""
    qpos = np.asarray(qpos, np.float64)
    return np.clip(1.0 - qpos[:, 7:9].mean(axis=1, keepdims=True) / FINGER_OPEN_M, 0.0, 1.0)


def droid_layout(observation: dict[str, Any]) -> dict[str, Any]:
    """The Arena DROID layout of a ``maniskill`` Panda observation (module docstring).

    Returns ``{"camera_obs": {"external_camera_rgb", "wrist_camera_rgb": uint8 (N, H, W, 3)},
    "policy": {"joint_pos": float64 (N, 7), "gripper_pos": float64 (N, 1)}}`` (the cameras
    are the observation's arrays, not copies), plus ``task`` when present.

    Raises:
        ObservationError: no ``policy/qpos`` of a Panda (9 joints), or a camera is missing
            (the wrist camera needs ``environment.robot: panda_wristcam`` and an rgb
            ``obs_mode``).
    """
    policy = observation.get("policy") or {}
    qpos = policy.get("qpos")
    if qpos is None or np.asarray(qpos).ndim != 2 or np.asarray(qpos).shape[1] != 9:
        shape = None if qpos is None else np.asarray(qpos).shape
        raise ObservationError(f"a DROID model needs the Panda's policy/qpos (N, 9); got {shape}")
    cameras = observation.get("camera_obs") or {}
    for key in (EXTERIOR_CAMERA, WRIST_CAMERA):
        if key not in cameras:
            raise ObservationError(
                f"a DROID model needs camera_obs['{key}'] (have {sorted(cameras)}): run the maniskill environment "
                "with obs_mode: rgb and robot: panda_wristcam (its hand_camera is the wrist camera)"
            )
    out: dict[str, Any] = {
        "camera_obs": {"external_camera_rgb": cameras[EXTERIOR_CAMERA], "wrist_camera_rgb": cameras[WRIST_CAMERA]},
        "policy": {"joint_pos": np.asarray(qpos, np.float64)[:, :7], "gripper_pos": gripper_position(qpos)},
    }
    if "task" in observation:
        out["task"] = observation["task"]
    return out


def maniskill_actions(chunk: np.ndarray) -> np.ndarray:
    """DROID joint-position actions ``(H, 8)`` (7 joints rad, gripper 0 open ... 1 closed) as
    ``pd_joint_pos`` actions ``float64 (H, 8)`` (gripper ``1 - 2 g``; ManiSkill clips it)."""
    out = np.array(chunk, np.float64, copy=True)
    out[:, 7] = 1.0 - 2.0 * out[:, 7]
    return out


def droid_actions(actions: np.ndarray) -> np.ndarray:
    """The inverse of :func:`maniskill_actions`: ``pd_joint_pos`` actions as DROID's."""
    out = np.array(actions, np.float64, copy=True)
    out[:, 7] = (1.0 - out[:, 7]) / 2.0
    return out


class ManiSkillDroidAdapter(OpenPIDroidAdapter):
    """openpi DROID (joint-position checkpoints) on the ``maniskill`` Panda with
    ``control_mode: pd_joint_pos`` (module docstring); registered as openpi embodiment
    ``maniskill_droid``, with the ``droid`` adapter's chunk lengths and horizons per variant.

    Request: the openpi ``droid`` adapter's (two ``uint8 (224, 224, 3)`` images, ``float64
    (7,)`` joints, ``float64 (1,)`` gripper, prompt), read through :func:`droid_layout`.
    Reply: ``actions (H, 8)`` in DROID's convention, returned as ``pd_joint_pos`` actions
    ``float64 (H, 8)`` (:func:`maniskill_actions`).

    Raises:
        arena.errors.ObservationError: as :func:`droid_layout`.
    """

    def extract(self, observation: dict[str, Any], env_id: int) -> DroidFrame:
        return super().extract(droid_layout(observation), env_id)

    def unpack_actions(self, response: dict[str, Any], key: str) -> np.ndarray:
        return maniskill_actions(super().unpack_actions(response, key))

    def pack_actions(self, actions: np.ndarray, key: str = "actions") -> dict[str, Any]:
        packed = super().pack_actions(actions, key)
        return {key: droid_actions(packed[key])}
