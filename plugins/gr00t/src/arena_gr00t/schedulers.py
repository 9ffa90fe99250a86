"""Action schedulers: when to ask the GR00T server for a batched chunk, and what each env does.

Both schedulers keep one chunk ``(chunk_length, action_dim)`` per env in arena's
:class:`~arena.policies.chunks.ChunkBroker` (which replays it, drops it on reset and on a
reconnect, and keeps each env's latency records) and always fetch for **all** envs in one
request (``reference/isaaclab-arena.md`` section 1); a scheduler only decides when to fetch
and which envs take the new rows:

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
from typing import ClassVar, NamedTuple

import numpy as np

from arena.policies.adapters import ProtocolViolation
from arena.policies.chunks import ChunkBroker

__all__ = ["SCHEDULERS", "ActionScheduler", "ChunkScheduler", "Fetched", "SyncedBatchScheduler", "make_scheduler"]


class Fetched(NamedTuple):
    """A fetch's chunk ``(num_envs, H, action_dim)`` with the request's wall-clock latency
    (ms), recorded for every env that takes the new rows."""

    actions: np.ndarray
    latency_ms: float | None = None


Fetch = Callable[[], "np.ndarray | Fetched"]

#: The dtype GR00T's actions reach the simulator in (its replies are float32 already).
ACTION_DTYPE = np.float32


class ActionScheduler:
    """The rule deciding when to fetch, over a :class:`ChunkBroker` (``broker``) of per-env chunks.

    Counters: ``fetches`` (requests made), ``rows_requested`` (envs per request, summed),
    ``rows_used`` (envs that took the new rows); per env ``requests`` (the broker's) and
    ``held_steps`` since its last reset.
    """

    name: ClassVar[str] = ""
    needs_hold: ClassVar[bool] = False

    def __init__(self, num_envs: int, chunk_length: int, action_dim: int) -> None:
        self.num_envs = num_envs
        self.chunk_length = chunk_length
        self.action_dim = action_dim
        self.broker = ChunkBroker(num_envs, chunk_length, action_dim)
        self.fetches = 0
        self.rows_requested = 0
        self.rows_used = 0
        self.held_steps = np.zeros(num_envs, dtype=np.int64)

    @property
    def requests(self) -> np.ndarray:
        """``int64 (num_envs,)``: chunks each env took since its last reset."""
        return self.broker.requests

    @property
    def active(self) -> np.ndarray:
        """``bool (num_envs,)``: the envs running an episode."""
        return self.broker.active

    def set_active(self, env_ids: list[int]) -> None:
        """Only ``env_ids`` run episodes: the others never trigger a fetch or take rows."""
        self.broker.set_active(env_ids)

    def needs_chunk(self) -> np.ndarray:
        """``bool (num_envs,)``: active envs whose chunk is used up (or that were reset)."""
        return self.broker.due()

    def reset(self, env_ids: list[int] | None = None) -> None:
        """Drop the chunks of ``env_ids`` (all when ``None``) and their per-env counters and records."""
        self.broker.reset(env_ids)
        self.held_steps[slice(None) if env_ids is None else np.asarray(env_ids, dtype=np.intp)] = 0

    def invalidate(self) -> None:
        """Drop every env's chunk (after a reconnect: never replay a possibly stale chunk)."""
        self.broker.discard()

    def get_action(self, fetch: Fetch, hold_action: np.ndarray | None = None) -> np.ndarray:
        """Return ``float32 (num_envs, action_dim)`` for this step, calling ``fetch`` when due.

        ``fetch()`` returns ``(num_envs, H >= chunk_length, action_dim)`` for every env, bare
        or as :class:`Fetched` with the request's latency.

        Raises:
            whatever ``fetch`` raises (nothing is advanced then);
            ProtocolViolation: ``fetch`` returned the wrong shape.
        """
        raise NotImplementedError

    def _fill(self, fetch: Fetch) -> None:
        reply = fetch()
        fetched = reply if isinstance(reply, Fetched) else Fetched(reply)
        chunk = np.asarray(fetched.actions, dtype=ACTION_DTYPE)
        need = self.needs_chunk()  # after fetch: a reconnect inside it may have invalidated all
        if chunk.ndim != 3 or chunk.shape[0] != self.num_envs or chunk.shape[1] < self.chunk_length or chunk.shape[2] != self.action_dim:
            raise ProtocolViolation(
                f"action chunk has shape {tuple(chunk.shape)}; expected ({self.num_envs}, H>={self.chunk_length}, {self.action_dim})"
            )
        self.broker.put(np.flatnonzero(need), chunk[need], latency_ms=fetched.latency_ms)
        self.fetches += 1
        self.rows_requested += self.num_envs
        self.rows_used += int(need.sum())

    def _emit(self, rows: np.ndarray) -> np.ndarray:
        return self.broker.take(rows, out=np.zeros((self.num_envs, self.action_dim), ACTION_DTYPE))


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
