"""Action schedulers: when to ask the GR00T server for a batched chunk, and what each env does.

Both schedulers buffer one chunk ``(chunk_length, action_dim)`` per env and always fetch for
**all** envs in one request (``reference/isaaclab-arena.md`` section 1):

* ``chunk``: fetch as soon as **any** env has used up its chunk; only the envs that needed
  one take the new rows, the others keep replaying theirs (more requests, no idle steps).
* ``synced_batch``: fetch only when **every** active env needs a chunk; an env that runs out early
  (e.g. after an episode reset) gets the ``hold_action`` (its current joint positions) until
  the others catch up (one request per ``chunk_length`` steps, up to ``chunk_length - 1``
  held steps per early reset).

Only active envs (:meth:`ActionScheduler.set_active`: those running an episode) count: an
idle env never triggers a fetch, takes no rows and gets a zero row (the rollout applies its
last action again). A failed fetch changes nothing, so the same step can be asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from arena.policies.adapters import ProtocolViolation

__all__ = ["SCHEDULERS", "ActionScheduler", "ChunkScheduler", "SyncedBatchScheduler", "make_scheduler"]

Fetch = Callable[[], np.ndarray]


class ActionScheduler:
    """Per-env chunk buffers plus the rule deciding when to fetch.

    Counters: ``fetches`` (requests made), ``rows_requested`` (envs per request, summed),
    ``rows_used`` (envs that took the new rows); per env ``requests`` and ``held_steps`` since
    its last reset.
    """

    name: ClassVar[str] = ""
    needs_hold: ClassVar[bool] = False

    def __init__(self, num_envs: int, chunk_length: int, action_dim: int) -> None:
        self.num_envs = num_envs
        self.chunk_length = chunk_length
        self.action_dim = action_dim
        self.buffer = np.zeros((num_envs, chunk_length, action_dim), np.float32)
        self.index = np.full(num_envs, chunk_length, dtype=np.int64)  # == chunk_length: needs a chunk
        self.fetches = 0
        self.rows_requested = 0
        self.rows_used = 0
        self.requests = np.zeros(num_envs, dtype=np.int64)
        self.held_steps = np.zeros(num_envs, dtype=np.int64)
        self.active = np.ones(num_envs, dtype=bool)

    def set_active(self, env_ids: list[int]) -> None:
        """Only ``env_ids`` run episodes: the others never trigger a fetch or take rows."""
        self.active[:] = False
        self.active[np.asarray(list(env_ids), dtype=np.intp)] = True

    def needs_chunk(self) -> np.ndarray:
        """``bool (num_envs,)``: active envs whose chunk is used up (or that were reset)."""
        return (self.index >= self.chunk_length) & self.active

    def reset(self, env_ids: list[int] | None = None) -> None:
        """Drop the chunks of ``env_ids`` (all when ``None``) and their per-env counters."""
        ids = slice(None) if env_ids is None else np.asarray(env_ids, dtype=np.intp)
        self.index[ids] = self.chunk_length
        self.buffer[ids] = 0.0
        self.requests[ids] = 0
        self.held_steps[ids] = 0

    def invalidate(self) -> None:
        """Drop every env's chunk (after a reconnect: never replay a possibly stale chunk)."""
        self.index[:] = self.chunk_length

    def get_action(self, fetch: Fetch, hold_action: np.ndarray | None = None) -> np.ndarray:
        """Return ``float32 (num_envs, action_dim)`` for this step, calling ``fetch`` when due.

        ``fetch()`` returns ``(num_envs, H >= chunk_length, action_dim)`` for every env.

        Raises:
            whatever ``fetch`` raises (nothing is advanced then);
            ProtocolViolation: ``fetch`` returned the wrong shape.
        """
        raise NotImplementedError

    def _fill(self, fetch: Fetch) -> None:
        chunk = np.asarray(fetch(), dtype=np.float32)
        need = self.needs_chunk()  # after fetch: a reconnect inside it may have invalidated all
        if chunk.ndim != 3 or chunk.shape[0] != self.num_envs or chunk.shape[1] < self.chunk_length or chunk.shape[2] != self.action_dim:
            raise ProtocolViolation(
                f"action chunk has shape {tuple(chunk.shape)}; expected ({self.num_envs}, H>={self.chunk_length}, {self.action_dim})"
            )
        self.buffer[need] = chunk[need, : self.chunk_length]
        self.index[need] = 0
        self.fetches += 1
        self.rows_requested += self.num_envs
        self.rows_used += int(need.sum())
        self.requests[need] += 1

    def _emit(self, rows: np.ndarray) -> np.ndarray:
        envs = np.flatnonzero(rows)
        out = np.zeros((self.num_envs, self.action_dim), np.float32)
        out[envs] = self.buffer[envs, self.index[envs]]
        self.index[envs] += 1
        return out


class ChunkScheduler(ActionScheduler):
    """Fetch for the whole batch whenever any env needs a chunk; only those envs take it."""

    name: ClassVar[str] = "chunk"

    def get_action(self, fetch: Fetch, hold_action: np.ndarray | None = None) -> np.ndarray:
        if self.needs_chunk().any():
            self._fill(fetch)
        return self._emit(self.active)


class SyncedBatchScheduler(ActionScheduler):
    """Fetch only when every env needs a chunk; waiting envs get ``hold_action``."""

    name: ClassVar[str] = "synced_batch"
    needs_hold: ClassVar[bool] = True

    def get_action(self, fetch: Fetch, hold_action: np.ndarray | None = None) -> np.ndarray:
        need = self.needs_chunk()
        if need.any() and need[self.active].all():
            self._fill(fetch)
            need = self.needs_chunk()
        if not need.any():
            return self._emit(self.active)
        if hold_action is None:
            raise ValueError("synced_batch needs hold_action for envs waiting for the next batched chunk")
        out = self._emit(self.active & ~need)
        out[need] = np.asarray(hold_action, dtype=np.float32)[need]
        self.held_steps[need] += 1
        return out


SCHEDULERS: dict[str, type[ActionScheduler]] = {
    ChunkScheduler.name: ChunkScheduler,
    SyncedBatchScheduler.name: SyncedBatchScheduler,
}


def make_scheduler(name: str, num_envs: int, chunk_length: int, action_dim: int) -> ActionScheduler:
    """Build the scheduler registered as ``name`` (``chunk`` or ``synced_batch``).

    Raises:
        ValueError: unknown name.
    """
    try:
        cls = SCHEDULERS[name]
    except KeyError:
        raise ValueError(f"unknown action scheduler {name!r}; expected one of {sorted(SCHEDULERS)}") from None
    return cls(num_envs, chunk_length, action_dim)
