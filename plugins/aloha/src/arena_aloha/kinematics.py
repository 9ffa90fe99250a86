"""Kinematics of gym-aloha's two ViperX 300s arms, in numpy (no simulator needed).

The chain is the one of gym-aloha's scene (``vx300s_left.xml`` / ``vx300s_right.xml``): six
revolute joints, each body offset along its parent's axes with no rotation, the left arm's base
at (-0.469, 0.5, 0) m and the right arm's at (0.469, 0.5, 0) m turned by pi about z, so both
face the table's centre line x = 0. The tool point is between the fingertips, ``TOOL_OFFSET`` m
along the gripper link's x axis (the axis the gripper points along; the fingers slide along
its y axis). A test checks :func:`forward` against MuJoCo's own positions of the scene.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Joint offsets (m, in the parent body's frame) and rotation axes of the six arm joints:
#: waist, shoulder, elbow, forearm roll, wrist angle, wrist rotate.
_OFFSETS = np.array(
    [
        [0.0, 0.0, 0.079],
        [0.0, 0.0, 0.04805],
        [0.05955, 0.0, 0.3],
        [0.2, 0.0, 0.0],
        [0.1, 0.0, 0.0],
        [0.069744, 0.0, 0.0],
    ]
)
_AXES = np.array([[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0]], dtype=float)
#: Joint limits (rad) of the six joints, from the scene.
JOINT_LOW = np.array([-3.14158, -1.85005, -1.76278, -3.14158, -1.8675, -3.14158])
JOINT_HIGH = np.array([3.14158, 1.25664, 1.6057, 3.14158, 2.23402, 3.14158])
#: Tool point in the gripper link's frame (m): between the fingertips.
TOOL_OFFSET = np.array([0.12, 0.0, 0.0])


@dataclass(frozen=True)
class Arm:
    """One arm's base: position (m) and yaw (rad) in the world."""

    base: tuple[float, float, float]
    yaw: float


LEFT = Arm(base=(-0.469, 0.5, 0.0), yaw=0.0)
RIGHT = Arm(base=(0.469, 0.5, 0.0), yaw=np.pi)


def rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix about a unit ``axis`` by ``angle`` rad (Rodrigues)."""
    x, y, z = axis
    k = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def forward(arm: Arm, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Forward kinematics of ``q`` (6 joint angles, rad).

    Returns ``(tool_pos (3,), tool_rot (3, 3), joint_pos (6, 3), joint_axes (6, 3))`` in the
    world frame (m); the rotation's columns are the gripper link's axes.
    """
    rot = rotation(np.array([0.0, 0.0, 1.0]), arm.yaw)
    pos = np.asarray(arm.base, float)
    origins = np.zeros((6, 3))
    axes = np.zeros((6, 3))
    for i in range(6):
        pos = pos + rot @ _OFFSETS[i]
        axis = rot @ _AXES[i]
        origins[i], axes[i] = pos, axis
        rot = rot @ rotation(_AXES[i], float(q[i]))
    return pos + rot @ TOOL_OFFSET, rot, origins, axes


def inverse(
    arm: Arm,
    target_pos: np.ndarray,
    target_rot: np.ndarray,
    q_start: np.ndarray,
    *,
    iterations: int = 60,
    damping: float = 0.02,
    orientation_weight: float = 0.3,
) -> np.ndarray:
    """Joint angles ``(6,)`` (rad, within the limits) placing the tool at a pose, from ``q_start``.

    Damped least squares on the position error (m) and the orientation error (rad, weighted by
    ``orientation_weight``); returns the best iterate when the pose is out of reach.
    """
    q = np.clip(np.asarray(q_start, float).copy(), JOINT_LOW, JOINT_HIGH)
    best, best_err = q.copy(), np.inf
    for _ in range(iterations):
        pos, rot, origins, axes = forward(arm, q)
        e_pos = target_pos - pos
        e_rot = 0.5 * sum(np.cross(rot[:, i], target_rot[:, i]) for i in range(3))
        err = np.concatenate([e_pos, orientation_weight * e_rot])
        norm = float(np.linalg.norm(err))
        if norm < best_err:
            best, best_err = q.copy(), norm
        if norm < 1e-5:
            break
        jac = np.zeros((6, 6))
        for i in range(6):
            jac[:3, i] = np.cross(axes[i], pos - origins[i])
            jac[3:, i] = orientation_weight * axes[i]
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(6), err)
        q = np.clip(q + step, JOINT_LOW, JOINT_HIGH)
    return best
