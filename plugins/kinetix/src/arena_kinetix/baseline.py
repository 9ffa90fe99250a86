"""``kinetix_hill_climb``: a scripted, closed-loop, chunked Kinetix baseline (no learning).

Kinetix levels are solved by bringing the green shape onto the blue one; the environment
reports their distance (``observation["policy"]["distance"]``, Kinetix's own dense-reward
signal; ``-1`` before the first step). The baseline holds one action for a whole chunk and
climbs that signal: at every request it keeps its action when the distance fell by more than
``tolerance`` since the previous request, and otherwise draws a new one (motors uniform in
``[-1, 1]``, thrusters in ``[0, 1]``) from a generator seeded by ``(seed, episode seed)``.

Why this baseline: it needs no training and no level-specific code, it solves the levels where
one held motor/thruster setting moves the green shape to the goal (measured in the plugin
README), and it is closed-loop through the distance it observes at each request, so the
observation a chunk is planned from matters: a delay ``d`` makes it judge (and keep) an action
on a stale distance, which is what a delay sweep should expose. Chunks are ``chunk_size``
copies of the held action (``get_action_chunk``, :mod:`arena.live.chunks`); in sync mode it
replans every ``chunk_size`` steps as well.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from arena.policies.base import PolicyBase, PolicyConfig

MOTORS = 4


class HillClimbConfig(PolicyConfig):
    seed: int = Field(0, description="policy seed, combined with each episode's seed")
    chunk_size: int = Field(8, ge=1, description="rows of each chunk (RTC's H = 8)")
    tolerance: float = Field(0.01, ge=0, description="distance decrease that counts as progress")

    def live_chunk_rows(self) -> int:
        return self.chunk_size


class KinetixHillClimb(PolicyBase[HillClimbConfig]):
    """See the module docstring. Actions ``float64 (num_envs, 6)``; chunks ``(num_envs, H, 6)``.

    Raises:
        KeyError: the observation has no ``policy.distance`` (not the ``kinetix`` environment).
    """

    name = "kinetix_hill_climb"
    Config = HillClimbConfig

    def __init__(self, config: HillClimbConfig) -> None:
        super().__init__(config)
        self._rng: dict[int, np.random.Generator] = {}
        self._action: dict[int, np.ndarray] = {}
        self._distance: dict[int, float | None] = {}
        self._step: dict[int, int] = {}

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        for e, seed in zip(env_ids or [], seeds or []):
            self._rng[e] = np.random.default_rng([self.config.seed % 2**63, int(seed) % 2**63])
            self._action[e] = self._draw(e)
            self._distance[e] = None
            self._step[e] = 0

    def _draw(self, env_id: int) -> np.ndarray:
        action = self._rng[env_id].uniform(-1.0, 1.0, 6)
        action[MOTORS:] = np.abs(action[MOTORS:])
        return action

    def get_action_chunk(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        distance = np.asarray(observation["policy"]["distance"], np.float64).reshape(env.num_envs, -1)[:, 0]
        out = np.zeros((env.num_envs, self.config.chunk_size, 6))
        for e in range(env.num_envs):
            if not self.is_active(e) or e not in self._rng:
                continue
            now = float(distance[e])
            before = self._distance.get(e)
            if now >= 0 and before is not None and not now < before - self.config.tolerance:
                self._action[e] = self._draw(e)
            self._distance[e] = now if now >= 0 else None
            out[e] = self._action[e]
        return out

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        """Sync mode: a new chunk every ``chunk_size`` steps, its held action in between."""
        due = [e for e in range(env.num_envs) if self.is_active(e) and self._step.get(e, 0) % self.config.chunk_size == 0]
        if due:
            active = self.active_envs
            self.set_active(due)
            try:
                chunks = self.get_action_chunk(env, observation)
            finally:
                self.active_envs = active
            for e in due:
                self._action[e] = chunks[e, 0]
        out = np.zeros((env.num_envs, 6))
        for e in range(env.num_envs):
            if self.is_active(e) and e in self._action:
                out[e] = self._action[e]
                self._step[e] = self._step.get(e, 0) + 1
        return out
