"""``aloha_transfer_cube_expert``: a scripted transfer-cube policy, to prove the success signal.

It plays the classic ALOHA hand-over (the shape of the scripted demonstrations of ACT's
simulated transfer cube) in end-effector space and turns it into the environment's absolute
joint targets with :mod:`arena_aloha.kinematics`:

1. the right arm (the one nearer the cube) moves above the cube with its gripper tilted 60
   degrees down, descends, closes, and lifts the cube to a hand-over point over the table;
2. the left arm comes in level from the left with its fingers vertical, and closes on the
   cube the right arm holds: the staged reward reaches 4 when the left finger touches the cube
   in the air.

It is deterministic: the same episode seed gives the same actions every run. It reads the
cube's initial position (``policy/object_pose``) at the start of each episode and the cube's
position again while the left arm approaches; it needs no camera, so run it with
``cameras: []``. It runs in arena's own interpreter (numpy only, no simulator).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from arena.errors import ConfigError
from arena.policies.base import PolicyBase, PolicyConfig
from arena_aloha import kinematics as kin

if TYPE_CHECKING:
    from arena.envs.base import Environment

OPEN, CLOSED = 1.0, 0.0
#: Tool point of the right gripper when it hands the cube over (m, world).
HANDOVER = np.array([0.0, 0.5, 0.22])
#: Height (m) of the right tool point when it closes on the cube (4 cm, resting on the table):
#: as low as the tilted fingertips clear the table.
GRASP_HEIGHT = 0.035
#: How far (m) the right gripper backs off along its pointing axis before descending on the cube.
_APPROACH = 0.07
#: Downward tilt (rad) of the right gripper while it picks and holds the cube.
_PICK_TILT = np.deg2rad(60.0)


def _frame(x_axis: np.ndarray, y_hint: np.ndarray) -> np.ndarray:
    """Rotation whose x axis is ``x_axis`` and whose y axis is ``y_hint`` made orthogonal to it."""
    x = x_axis / np.linalg.norm(x_axis)
    y = y_hint - x * float(x @ y_hint)
    y /= np.linalg.norm(y)
    return np.stack([x, y, np.cross(x, y)], axis=1)


def _pick_rotation(toward: np.ndarray) -> np.ndarray:
    """Right gripper pointing at ``toward`` (horizontally) and tilted down, fingers level."""
    facing = np.array([toward[0] - kin.RIGHT.base[0], toward[1] - kin.RIGHT.base[1], 0.0])
    facing /= np.linalg.norm(facing)
    x_axis = np.cos(_PICK_TILT) * facing + np.sin(_PICK_TILT) * np.array([0.0, 0.0, -1.0])
    return _frame(x_axis, np.cross([0.0, 0.0, 1.0], facing))


#: Left gripper level, pointing +x at the cube, fingers one above the other.
_LEFT_ROTATION = _frame(np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))


@dataclass
class _Waypoint:
    step: int
    pos: np.ndarray
    rot: np.ndarray
    gripper: float


def _rotation_log(rot: np.ndarray) -> np.ndarray:
    """Axis times angle (rad) of a rotation matrix."""
    cos = np.clip((np.trace(rot) - 1.0) / 2.0, -1.0, 1.0)
    angle = float(np.arccos(cos))
    if angle < 1e-9:
        return np.zeros(3)
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    if np.sin(angle) < 1e-6:  # half a turn: the axis from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(rot) + 1.0) / 2.0, 0.0))
        return axis / np.linalg.norm(axis) * angle
    return axis / (2.0 * np.sin(angle)) * angle


def _exp(vec: np.ndarray) -> np.ndarray:
    angle = float(np.linalg.norm(vec))
    if angle < 1e-12:
        return np.eye(3)
    return kin.rotation(vec / angle, angle)


def _at(path: list[_Waypoint], step: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Pose and gripper of a waypoint path at ``step``: linear in position, geodesic in rotation."""
    if step <= path[0].step:
        return path[0].pos, path[0].rot, path[0].gripper
    for a, b in zip(path, path[1:]):
        if step <= b.step:
            s = (step - a.step) / (b.step - a.step)
            rot = a.rot @ _exp(s * _rotation_log(a.rot.T @ b.rot))
            return a.pos + s * (b.pos - a.pos), rot, a.gripper + s * (b.gripper - a.gripper)
    return path[-1].pos, path[-1].rot, path[-1].gripper


@dataclass
class _Episode:
    """One env's plan and progress."""

    right: list[_Waypoint]
    left_start: _Waypoint
    q_left: np.ndarray
    q_right: np.ndarray
    step: int = 0


#: Steps of the script (50 Hz): the right arm is over the cube at 45, on it at 75, closed by
#: 90, at the hand-over point at 130; the left arm is beside the cube at 150 and closes by 185.
_RIGHT_ABOVE, _RIGHT_DOWN, _RIGHT_CLOSED, _RIGHT_HANDOVER = 45, 75, 90, 130
_LEFT_READY, _LEFT_IN, _LEFT_CLOSED = 110, 150, 185
#: Where the cube's centre hangs when the right tool point is at HANDOVER (it slips about 1.5 cm
#: in the tilted fingers), and over how many steps the left arm's aim moves to the measured cube.
_CUBE_IN_HAND = HANDOVER + np.array([0.0, 0.0, -0.015])
_BLEND_STEPS = 20


class AlohaTransferCubeExpertConfig(PolicyConfig):
    """``aloha_transfer_cube_expert`` has no options."""

    def validate_run(self, run: Any) -> None:
        """At ``arena validate``: the run's environment is ``aloha`` with task ``transfer_cube``
        (else its first step would refuse it, after the whole run started)."""
        from arena_aloha.config import AlohaConfig

        if not isinstance(run.environment, AlohaConfig):
            raise ValueError("aloha_transfer_cube_expert drives the 'aloha' environment only")
        if run.environment.task != "transfer_cube":
            raise ValueError(f"aloha_transfer_cube_expert solves transfer_cube only, not environment.task {run.environment.task!r}")


class AlohaTransferCubeExpert(PolicyBase[AlohaTransferCubeExpertConfig]):
    """Scripted hand-over for the ``aloha`` environment's ``transfer_cube`` (module docstring).

    Raises:
        arena.errors.ConfigError: the environment is not ALOHA ``transfer_cube`` (its
            observation has no ``policy/object_pose`` of one object or names another task).
    """

    name = "aloha_transfer_cube_expert"
    Config = AlohaTransferCubeExpertConfig

    def __init__(self, config: AlohaTransferCubeExpertConfig) -> None:
        super().__init__(config)
        self._episodes: dict[int, _Episode] = {}

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        if env_ids is None:
            self._episodes.clear()
            return
        for env_id in env_ids:
            self._episodes.pop(int(env_id), None)

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        policy = observation.get("policy", {})
        if "object_pose" not in policy or "joint_pos" not in policy:
            raise ConfigError("aloha_transfer_cube_expert needs the aloha environment's policy/joint_pos and policy/object_pose")
        joints = np.asarray(policy["joint_pos"], np.float64)
        poses = np.asarray(policy["object_pose"], np.float64)
        tasks = observation.get("task") or ["transfer_cube"] * len(joints)
        actions = np.zeros((len(joints), 14), np.float32)
        for e in range(len(joints)):
            if tasks[e] != "transfer_cube" or poses.shape[1] != 7:
                raise ConfigError(f"aloha_transfer_cube_expert solves transfer_cube only, not {tasks[e]!r}")
            episode = self._episodes.get(e)
            if episode is None:
                episode = self._episodes[e] = self._plan(joints[e], poses[e, :3])
            actions[e] = self._act(episode, poses[e, :3])
            episode.step += 1
        return actions

    # -- the script --------------------------------------------------------------------------

    @staticmethod
    def _plan(joints: np.ndarray, cube: np.ndarray) -> _Episode:
        q_left, q_right = joints[0:6].copy(), joints[7:13].copy()
        right_pos, right_rot, _, _ = kin.forward(kin.RIGHT, q_right)
        left_pos, left_rot, _, _ = kin.forward(kin.LEFT, q_left)
        pick = _pick_rotation(cube)
        hold = _pick_rotation(HANDOVER)
        # The cube's initial pose is sampled 5 cm up; it drops onto the table at once.
        grasp = np.array([cube[0], cube[1], GRASP_HEIGHT])
        above = grasp - _APPROACH * pick[:, 0]
        right = [
            _Waypoint(0, right_pos, right_rot, OPEN),
            _Waypoint(_RIGHT_ABOVE, above, pick, OPEN),
            _Waypoint(_RIGHT_DOWN, grasp, pick, OPEN),
            _Waypoint(_RIGHT_CLOSED, grasp, pick, CLOSED),
            _Waypoint(_RIGHT_HANDOVER, HANDOVER, hold, CLOSED),
        ]
        return _Episode(right=right, left_start=_Waypoint(0, left_pos, left_rot, OPEN), q_left=q_left, q_right=q_right)

    def _act(self, episode: _Episode, cube: np.ndarray) -> np.ndarray:
        t = episode.step
        pos, rot, right_grip = _at(episode.right, t)
        episode.q_right = kin.inverse(kin.RIGHT, pos, rot, episode.q_right)
        # The left arm aims at where the cube should hang under the right gripper, then, once
        # the right arm holds it still, moves its aim smoothly to where the cube really is.
        blend = float(np.clip((t - _RIGHT_HANDOVER) / _BLEND_STEPS, 0.0, 1.0))
        target = _CUBE_IN_HAND + blend * (cube - _CUBE_IN_HAND)
        left = [
            episode.left_start,
            _Waypoint(_LEFT_READY, target + np.array([-0.12, 0.0, 0.0]), _LEFT_ROTATION, OPEN),
            _Waypoint(_LEFT_IN, target + np.array([-0.01, 0.0, 0.0]), _LEFT_ROTATION, OPEN),
            _Waypoint(_LEFT_CLOSED, target + np.array([-0.01, 0.0, 0.0]), _LEFT_ROTATION, CLOSED),
        ]
        pos, rot, left_grip = _at(left, t)
        episode.q_left = kin.inverse(kin.LEFT, pos, rot, episode.q_left)
        return np.concatenate([episode.q_left, [left_grip], episode.q_right, [right_grip]])
