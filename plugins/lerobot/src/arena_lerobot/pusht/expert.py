"""``pusht_expert``: a scripted PushT policy from privileged state (gym-pusht ships none).

It reads the disc's position, the block's pose and the goal pose (the environment's
``observation["privileged"]``, present for every obs type, so it needs no image) and pushes
the T onto the target with a quasi-static single-point pushing controller:

1. **Desired motion.** The block's error is the translation of its centre of gravity to where
   the goal puts it and its rotation (wrapped to ``(-pi, pi]``); the desired twist is
   ``(dx, dy, rotation_gain * rho * dtheta)`` (``rho``: a lever length in workspace units).
2. **Contact choice.** For 92 points along the T's outer boundary (concave corners the disc
   cannot reach left out), pushing along the inward normal moves the block (gym-pusht damps
   every velocity to zero at once: the block moves only while pushed) roughly along the twist
   ``(f, (r x f) / rho)``: ``r`` the lever from the centre of gravity, ``f`` the push
   direction. The contact whose twist points most along the desired one wins (a small bonus
   keeps the current contact; pre-contact points outside the walls are excluded).
3. **Reaching it.** The disc goes to an approach point 25 units out along the contact's
   normal by the shortest path that keeps clear of the block (a ring of 24 waypoints round the
   block, collision-checked segments, Dijkstra), then in along the normal, and pushes: its
   target lies ``min(push_step, 2 + error / 2)`` units inside the block, so pushes shrink as
   the block nears the goal.

Geometry and the goal are gym-pusht 0.1.8's (``PushTEnv.add_tee``: a 120 x 30 bar over a
30 x 90 stem, body origin at the bar's top edge, centre of gravity at ``(0, 45)`` in body
coordinates; the disc's radius is 15); the goal pose comes from the observation. Deterministic:
the same episode seed gives the same actions every run. Measured (``tests/test_pusht_end_to_end.py``,
README "PushT"): 20/20 successes on seeds 0-19 (mean max coverage 0.965), 78/80 on seeds 20-99.
It runs in arena's own interpreter (numpy only, no simulator).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from arena.policies.base import PolicyBase, PolicyConfig

#: The disc's radius (gym-pusht ``add_circle(..., 15)``).
DISC_RADIUS = 15.0
#: The block's centre of gravity in body coordinates (gym-pusht ``add_tee``: the mean of the
#: bar's and the stem's centroids).
CENTER_OF_GRAVITY = np.array([0.0, 45.0])
#: The T's two rectangles in body coordinates, as (low corner, high corner): bar, stem.
_BOXES = (np.array([[-60.0, 0.0], [60.0, 30.0]]), np.array([[-15.0, 30.0], [15.0, 120.0]]))
#: Pushable stretches of the T's outer boundary: (start, end, outward normal), body coordinates.
#: Where the bar's underside meets the stem the disc (radius 15) cannot reach within 15 units
#: of the corner, so those stretches stop 15 short of it.
_EDGES = (
    ((-60, 0), (60, 0), (0, -1)),
    ((-60, 0), (-60, 30), (-1, 0)),
    ((60, 0), (60, 30), (1, 0)),
    ((-60, 30), (-30, 30), (0, 1)),
    ((30, 30), (60, 30), (0, 1)),
    ((-15, 45), (-15, 120), (-1, 0)),
    ((15, 45), (15, 120), (1, 0)),
    ((-15, 120), (15, 120), (0, 1)),
)
#: Where the disc's centre may go (gym-pusht's walls are at 5 and 506).
_WORKSPACE = (20.0, 492.0)


def _contact_candidates(spacing: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """``(points (K, 2), outward normals (K, 2))`` along :data:`_EDGES`, body coordinates."""
    points, normals = [], []
    for start, end, normal in _EDGES:
        a, b = np.asarray(start, float), np.asarray(end, float)
        count = max(2, int(np.linalg.norm(b - a) // spacing) + 1)
        for t in np.linspace(0.08, 0.92, count):
            points.append(a + t * (b - a))
            normals.append(normal)
    return np.array(points), np.array(normals, float)


_CONTACTS, _NORMALS = _contact_candidates()


def _rotation(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def _wrap(angle: float) -> float:
    """``angle`` in ``[-pi, pi)``."""
    return float((angle + np.pi) % (2 * np.pi) - np.pi)


def distance_to_block(points: np.ndarray, block_pose: np.ndarray) -> np.ndarray:
    """``float (M,)``: distance of world ``points (M, 2)`` from the T at ``block_pose`` (x, y,
    angle; 0 inside)."""
    local = (np.asarray(points, float) - block_pose[:2]) @ _rotation(-block_pose[2]).T
    distance = np.full(len(local), np.inf)
    for low, high in _BOXES:
        outside = np.maximum(np.maximum(low - local, local - high), 0.0)
        distance = np.minimum(distance, np.linalg.norm(outside, axis=1))
    return distance


def _clear_segments(nodes: np.ndarray, block_pose: np.ndarray, clearance: float, samples: int = 10) -> np.ndarray:
    """``bool (M, M)``: whether the segment between nodes ``i`` and ``j`` keeps ``clearance``."""
    t = np.linspace(0.0, 1.0, samples)[None, None, :, None]
    points = nodes[:, None, None, :] + t * (nodes[None, :, None, :] - nodes[:, None, None, :])
    distance = distance_to_block(points.reshape(-1, 2), block_pose).reshape(len(nodes), len(nodes), samples)
    return distance.min(axis=2) >= clearance


def _first_waypoint(start: np.ndarray, goal: np.ndarray, block_pose: np.ndarray, centre: np.ndarray,
                    clearance: float, radius: float = 105.0, ring: int = 24) -> np.ndarray | None:
    """First waypoint of the shortest path ``start -> goal`` over clear segments through a ring of
    ``ring`` points ``radius`` round ``centre`` (clipped to the workspace); ``None``: no path."""
    angles = np.linspace(0.0, 2 * np.pi, ring, endpoint=False)
    points = np.clip(centre + radius * np.stack([np.cos(angles), np.sin(angles)], 1), *_WORKSPACE)
    nodes = np.vstack([start[None], points, goal[None]])
    lengths = np.linalg.norm(nodes[:, None] - nodes[None], axis=2)
    weights = np.where(_clear_segments(nodes, block_pose, clearance), lengths, np.inf)
    count = len(nodes)
    best, previous, done = np.full(count, np.inf), np.full(count, -1), np.zeros(count, bool)
    best[0] = 0.0
    for _ in range(count):  # Dijkstra on a complete graph of 26 nodes
        u = int(np.argmin(np.where(done, np.inf, best)))
        if not np.isfinite(best[u]):
            break
        done[u] = True
        through = best[u] + weights[u]
        better = through < best
        best[better], previous[better] = through[better], u
    if not np.isfinite(best[-1]):
        return None
    node = count - 1
    while previous[node] != 0:
        node = previous[node]
    return nodes[node]


class PushTExpertConfig(PolicyConfig):
    """Options of the scripted expert (``policy: {type: pusht_expert}``); the defaults are the
    measured ones (module docstring)."""

    rotation_gain: float = Field(2.0, gt=0, description="weight of the angle error against the position error")
    lever: float = Field(40.0, gt=0, description="rho: lever length (workspace units) that turns rotation into distance")
    push_step: float = Field(20.0, gt=0, description="deepest target inside the block while pushing (workspace units per step)")
    standoff: float = Field(6.0, ge=0, description="gap between disc and block at the pre-contact point (workspace units)")

    def validate_run(self, run: Any) -> None:
        from arena_lerobot.pusht.config import PushTConfig

        if not isinstance(run.environment, PushTConfig):
            raise ValueError("pusht_expert drives the 'pusht' environment only")


class _Pusher:
    """One env's controller; keeps the contact it pushes at between steps."""

    def __init__(self, config: PushTExpertConfig) -> None:
        self.c = config
        self.contact: int | None = None

    def act(self, agent: np.ndarray, block: np.ndarray, goal: np.ndarray) -> np.ndarray:
        c = self.c
        turn = _rotation(block[2])
        centre = block[:2] + turn @ CENTER_OF_GRAVITY
        move = goal[:2] + _rotation(goal[2]) @ CENTER_OF_GRAVITY - centre
        error = np.array([move[0], move[1], c.rotation_gain * c.lever * _wrap(goal[2] - block[2])])
        # The twist each candidate push gives (translation along the push, rotation from its lever).
        points = block[:2] + _CONTACTS @ turn.T
        normals = _NORMALS @ turn.T
        push = -normals
        lever = points - centre
        moment = lever[:, 0] * push[:, 1] - lever[:, 1] * push[:, 0]
        twists = np.stack([push[:, 0], push[:, 1], moment / c.lever], 1)
        twists /= np.linalg.norm(twists, axis=1, keepdims=True)
        magnitude = float(np.linalg.norm(error))
        score = twists @ (error / (magnitude + 1e-9))
        approach = points + normals * (DISC_RADIUS + c.standoff)
        reachable = np.all((approach > _WORKSPACE[0]) & (approach < _WORKSPACE[1]), axis=1)
        score = np.where(reachable, score, -2.0) - 0.0008 * np.linalg.norm(approach - agent, axis=1)
        if self.contact is not None:
            score[self.contact] += 0.1
        i = self.contact = int(np.argmax(score))
        point, normal = points[i], normals[i]
        touching = point + normal * DISC_RADIUS  # the disc's centre when it touches the contact
        offset = agent - touching
        along = float(offset @ normal)
        lateral = float(np.linalg.norm(offset - along * normal))
        if lateral < 6.0 and along < c.standoff + 4.0:
            return touching - normal * min(c.push_step, 2.0 + 0.5 * magnitude)  # push
        pre_contact = point + normal * (DISC_RADIUS + c.standoff)
        far = pre_contact + normal * 25.0
        if lateral < 8.0 and 0.0 < along <= c.standoff + 32.0:
            return pre_contact  # in the approach corridor: go in along the normal
        clearance = DISC_RADIUS + 2.0
        if distance_to_block(agent[None], block)[0] < clearance:
            away = agent - centre  # too close to leave cleanly: back off first
            return agent + 30.0 * away / (np.linalg.norm(away) + 1e-9)
        waypoint = _first_waypoint(agent, far, block, centre, clearance)
        return far if waypoint is None else waypoint


class PushTExpert(PolicyBase[PushTExpertConfig]):
    """Scripted PushT pushing (see the module docstring).

    ``get_action`` returns ``float64 (num_envs, 2)``: disc targets in workspace units.

    Raises:
        KeyError: the observation has no ``privileged`` ``agent_pos`` / ``block_pose`` /
            ``goal_pose`` (not the ``pusht`` environment).
    """

    name = "pusht_expert"
    Config = PushTExpertConfig

    def __init__(self, config: PushTExpertConfig) -> None:
        super().__init__(config)
        self._pushers: list[_Pusher] = []

    def start(self, env: Any) -> None:
        self._pushers = [_Pusher(self.config) for _ in range(env.num_envs)]

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        for e in range(len(self._pushers)) if env_ids is None else env_ids:
            self._pushers[e] = _Pusher(self.config)

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        state = observation["privileged"]
        agent = np.asarray(state["agent_pos"], np.float64)
        block = np.asarray(state["block_pose"], np.float64)
        goal = np.asarray(state["goal_pose"], np.float64)
        actions = np.zeros((len(self._pushers), 2), np.float64)
        for e, pusher in enumerate(self._pushers):
            if self.is_active(e):
                actions[e] = pusher.act(agent[e], block[e], goal[e])
        return actions
