"""A scripted pick-and-place expert for LIBERO tasks whose goal is one ``On``/``In`` predicate.

It proves the ``libero`` environment's success signal end to end (``arena run`` with a local
policy): on libero_spatial tasks ("pick up the black bowl ... and place it on the plate") it
grasps the bowl's rim and sets it down on the plate. It reads the ground truth that the
environment provides for this purpose (``observation["privileged"]["<object>_pos"]``) and
the task's goal from the catalog, so it needs no images (run it with ``cameras: false``).

Control: a proportional controller on the end-effector position (OSC_POSE deltas; an action
of 1 moves ~1 cm per 20 Hz step), orientation held, through the phases approach, descend,
close, lift, carry, lower, release, retreat; while carrying, the held object (not the
gripper) is steered to the target, and an object that slips out of the grasp is grasped
again where it comes to rest (while approaching, the grasp point follows the object). The
Panda's fingers close along the world y axis in LIBERO's start pose, so the rim is taken
``rim_offset_m`` to the side of the object's centre along y, across the bowl's wall.
Deterministic: no randomness. Measured (libero_spatial, init states 0-9): 10/10 on task 0 and
10/10 on task 1 when written; on mujoco 3.17.0, numpy 2.4.6, numba 0.68.1 the first grasp on
task 0, init states 0 and 1, slips and the second holds (success in 173 and 179 of 220 steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from arena.policies.base import PolicyBase, PolicyConfig

OPEN, CLOSED = -1.0, 1.0


class LiberoExpertConfig(PolicyConfig):
    """Options of the scripted expert (``policy: {type: libero_pick_place_expert}``)."""

    rim_offset_m: float = Field(0.05, description="grasp point's offset from the object's centre along y, metres")
    grasp_height_m: float = Field(0.02, description="grasp height above the object's origin, metres")
    hover_m: float = Field(0.12, description="approach height above grasp and release points, metres")
    release_height_m: float = Field(0.07, description="release height above the target's origin, metres")
    gain: float = Field(12.0, gt=0, description="action per metre of position error (clipped to [-1, 1])")
    slip_m: float = Field(0.04, gt=0, description="drift of the held object that counts as dropped (grasp again), metres")
    tolerance_m: float = Field(0.008, gt=0, description="distance at which a waypoint counts as reached, metres")

    def validate_run(self, run: Any) -> None:
        from arena_libero.env import LiberoConfig

        if not isinstance(run.environment, LiberoConfig):
            raise ValueError("libero_pick_place_expert drives the 'libero' environment only")
        goal = run.environment.selected_task().goal
        if len(goal) != 1 or goal[0][0] not in ("on", "in") or len(goal[0]) != 3:
            task = run.environment.selected_task()
            raise ValueError(
                f"libero_pick_place_expert handles one On/In goal; {task.suite} task {task.index} has {list(map(list, goal))}"
            )


@dataclass
class _Plan:
    phase: int = 0
    hold: int = 0
    grasp: np.ndarray | None = None
    carry: np.ndarray | None = None


class LiberoPickPlaceExpert(PolicyBase[LiberoExpertConfig]):
    """Scripted pick-and-place for ``On``/``In`` goals (see the module docstring).

    ``get_action`` returns ``float32 (num_envs, 7)``.

    Raises:
        KeyError: the observation has no ``privileged`` pose of the goal's objects.
    """

    name = "libero_pick_place_expert"
    Config = LiberoExpertConfig

    def __init__(self, config: LiberoExpertConfig) -> None:
        super().__init__(config)
        self._plans: list[_Plan] = []
        self._goal: tuple[str, ...] = ()

    def start(self, env: Any) -> None:
        self._plans = [_Plan() for _ in range(env.num_envs)]
        self._goal = tuple(env.config.selected_task().goal[0])

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        for e in range(len(self._plans)) if env_ids is None else env_ids:
            self._plans[e] = _Plan()

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        poses = observation["privileged"]
        eef = np.asarray(observation["policy"]["eef_pos"], np.float64)
        _, obj, target = self._goal
        target_key = _pose_key(poses, target)
        actions = np.zeros((len(self._plans), 7), np.float32)
        for e, plan in enumerate(self._plans):
            actions[e] = self._act(plan, eef[e], np.asarray(poses[f"{obj}_pos"][e]), np.asarray(poses[target_key][e]))
        return actions

    def _act(self, plan: _Plan, eef: np.ndarray, obj: np.ndarray, target: np.ndarray) -> np.ndarray:
        c = self.config
        if plan.phase == 0:
            # Approaching, the grasp point follows the object: after a drop it is still
            # falling or rolling, and a grasp planned where it slipped would close on air.
            plan.grasp = obj + np.array([0.0, c.rim_offset_m, c.grasp_height_m])
        up = np.array([0.0, 0.0, c.hover_m])
        release = target + np.array([0.0, 0.0, c.release_height_m])  # where the object goes
        # (waypoint, the point brought there, gripper command, steps held after reaching it).
        # Carrying, the held object (not the gripper) is brought to the waypoint.
        phases = [
            (plan.grasp + up, eef, OPEN, 0),
            (plan.grasp, eef, OPEN, 0),
            (plan.grasp, eef, CLOSED, 12),
            (plan.grasp + up, eef, CLOSED, 0),
            (release + up, obj, CLOSED, 0),
            (release, obj, CLOSED, 0),
            (release, obj, OPEN, 10),
            (eef + up, eef, OPEN, 10**9),  # released: retreat upwards
        ]
        if plan.phase == 3 and plan.carry is None:
            plan.carry = eef - obj  # the grasp just closed: how the gripper holds the object
        if 3 <= plan.phase <= 5 and np.linalg.norm(eef - obj - plan.carry) > c.slip_m:
            plan.phase, plan.hold, plan.grasp, plan.carry = 0, 0, None, None  # dropped: grasp again
            return self._act(plan, eef, obj, target)
        waypoint, point, gripper, hold = phases[plan.phase]
        error = np.zeros(3) if plan.phase == 6 else waypoint - point
        if np.linalg.norm(error) < c.tolerance_m or (hold and plan.hold):
            plan.hold += 1
            if plan.hold > hold and plan.phase < len(phases) - 1:
                plan.phase += 1
                plan.hold = 0
        action = np.zeros(7, np.float32)
        action[:3] = np.clip(c.gain * error, -1.0, 1.0)
        action[6] = gripper
        return action


def _pose_key(poses: dict[str, Any], name: str) -> str:
    """The privileged key of ``name``, or of the object a region belongs to
    (``basket_1_contain_region`` -> ``basket_1_pos``)."""
    if f"{name}_pos" in poses:
        return f"{name}_pos"
    owners = [k[: -len("_pos")] for k in poses if name.startswith(k[: -len("_pos")] + "_")]
    if not owners:
        raise KeyError(f"no privileged pose of {name!r} (have {', '.join(sorted(poses))})")
    return f"{max(owners, key=len)}_pos"
