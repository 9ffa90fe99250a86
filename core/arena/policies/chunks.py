"""``ChunkBroker``: the per-env action-chunk queues every remote policy replays from.

A remote policy asks its server for an **action chunk** ``(H, action_dim)`` per env, executes
its first ``open_loop_horizon`` rows one per step without asking again (open loop), then asks
for the next. The broker holds those rows for all ``num_envs`` envs at once and keeps, per env,
the records of the requests that filled them; the policy decides when and how to ask (one
request per env for openpi and Cosmos, one batched request for all envs for GR00T, one session
per episode for DreamZero), the broker what each env replays. Used by
:class:`arena.policies.remote.RemoteChunkReplayPolicy`, ``arena_gr00t``'s action schedulers
and ``arena_dreamzero``'s policy.

Arrays (``N`` = ``num_envs``, ``K`` = ``open_loop_horizon``, ``A`` = ``action_dim``):

* ``rows`` ``(N, K, A)``: each env's current chunk, its first ``length[e]`` rows valid; held
  in the dtype of the chunks put (``float32``, or wider when a wider chunk arrives, e.g.
  ``float64``: nothing is rounded here; the policy picks the dtype actions reach the simulator
  in, through ``take(..., out=)``);
* ``length`` ``int64 (N,)``: rows of the env's current chunk (``0``: none), at most ``K``;
* ``index`` ``int64 (N,)``: the next row to replay; the chunk is used up when ``index >= length``;
* ``active`` ``bool (N,)``: envs running an episode (:meth:`set_active`); an idle env is never
  due and takes no rows (the rollout applies its last action again);
* ``requests`` ``int64 (N,)``: chunks put for the env since its last :meth:`reset`.

Rules:

* :meth:`put` keeps rows ``[:K]`` of each chunk (all ``H`` when ``H < K``) and starts replaying
  them from row 0; the env's previous chunk, used up or not, is dropped.
* :meth:`take` hands out each row at most once, in order; an env is **due** (:meth:`due`) when
  it is active and its chunk is used up or gone.
* :meth:`reset` (a new episode) drops the envs' chunks *and* their records; :meth:`discard`
  (a reconnect: the server may have lost its state or been restarted with another model) drops
  chunks and keeps the records. A dropped row is never replayed.
* Records, one entry per env and per :meth:`put` that carries them: ``latency_ms`` (wall-clock
  milliseconds of the request that returned the chunk, measured by the client) and
  ``server_infer_ms`` (the server's own ``server_timing.infer_ms``, which arena's policy server
  adds to each openpi-protocol reply). :meth:`episode_info` summarizes them for the episode's
  record.

Thread-safe: openpi-protocol clients fetch the envs due on one step concurrently, each thread
putting its env's chunk while another may discard all after a reconnect.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from arena.policies.base import latency_stats

__all__ = ["ChunkBroker"]

EnvIds = Sequence[int] | np.ndarray


class ChunkBroker:
    """Action-chunk queues of ``num_envs`` envs, replaying ``open_loop_horizon`` rows each.

    Args:
        num_envs: ``N``, envs of the vectorized environment (>= 1).
        open_loop_horizon: ``K``, rows of a chunk replayed before the env is due again (>= 1).
        action_dim: ``A``, columns of every chunk (>= 1).
        active: env ids running an episode (default: all), as :meth:`set_active`.

    Raises:
        ValueError: a size is below 1.
    """

    def __init__(
        self, num_envs: int, open_loop_horizon: int, action_dim: int, *, active: Iterable[int] | None = None
    ) -> None:
        if min(num_envs, open_loop_horizon, action_dim) < 1:
            raise ValueError(
                f"num_envs, open_loop_horizon and action_dim must be >= 1; got {num_envs}, {open_loop_horizon}, {action_dim}"
            )
        self.num_envs = num_envs
        self.open_loop_horizon = open_loop_horizon
        self.action_dim = action_dim
        self.rows = np.zeros((num_envs, open_loop_horizon, action_dim), np.float32)
        self.length = np.zeros(num_envs, np.int64)
        self.index = np.zeros(num_envs, np.int64)
        self.active = np.ones(num_envs, bool)
        self.requests = np.zeros(num_envs, np.int64)
        self._latency_ms: list[list[float]] = [[] for _ in range(num_envs)]
        self._server_infer_ms: list[list[float]] = [[] for _ in range(num_envs)]
        self._lock = threading.Lock()
        if active is not None:
            self.set_active(active)

    # -- which envs ----------------------------------------------------------------------------
    def set_active(self, env_ids: Iterable[int]) -> None:
        """Only ``env_ids`` run episodes from now on: the others are never due and take no rows."""
        mask = np.zeros(self.num_envs, bool)
        mask[np.asarray(list(env_ids), dtype=np.intp)] = True
        self.active = mask

    def due(self) -> np.ndarray:
        """``bool (N,)``: active envs whose chunk is used up, or that have none (new, reset,
        discarded): they need a request before they can :meth:`take`."""
        return self.active & (self.index >= self.length)

    # -- filling and dropping --------------------------------------------------------------------
    def put(
        self,
        env_ids: EnvIds,
        chunks: np.ndarray,
        *,
        latency_ms: float | None = None,
        server_infer_ms: float | None = None,
    ) -> None:
        """Give each of ``env_ids`` its new chunk, ``chunks[j]`` for ``env_ids[j]``, and record
        the request that returned it (one ``latency_ms`` and, if given, one ``server_infer_ms``
        entry per env; a batched request records its one latency for every env it served).

        ``chunks``: ``(len(env_ids), H, A)`` with ``H >= 1`` (or ``(H, A)`` for one env); rows
        past ``open_loop_horizon`` are not kept.

        Raises:
            ValueError: ``chunks`` has another shape, or an env id repeats.
        """
        ids = np.asarray(env_ids, dtype=np.intp).reshape(-1)
        chunks = np.asarray(chunks)
        if chunks.ndim == 2 and ids.size == 1:
            chunks = chunks[None]
        if chunks.ndim != 3 or chunks.shape[0] != ids.size or chunks.shape[1] < 1 or chunks.shape[2] != self.action_dim:
            raise ValueError(
                f"chunks have shape {tuple(chunks.shape)}; expected ({ids.size}, H>=1, {self.action_dim})"
            )
        if len(set(ids.tolist())) != ids.size:
            raise ValueError(f"env ids repeat: {ids.tolist()}")
        rows = min(chunks.shape[1], self.open_loop_horizon)
        with self._lock:
            wider = np.promote_types(self.rows.dtype, chunks.dtype)
            if wider != self.rows.dtype:
                self.rows = self.rows.astype(wider)
            self.rows[ids] = 0
            self.rows[ids, :rows] = chunks[:, :rows]
            self.length[ids] = rows
            self.index[ids] = 0
            self.requests[ids] += 1
            for e in ids.tolist():
                if latency_ms is not None:
                    self._latency_ms[e].append(float(latency_ms))
                if server_infer_ms is not None:
                    self._server_infer_ms[e].append(float(server_infer_ms))

    def discard(self, env_ids: EnvIds | None = None) -> None:
        """Drop the chunks of ``env_ids`` (all envs when ``None``), keeping their records:
        after a reconnect, never replay a chunk of a server that may have lost its state."""
        ids = slice(None) if env_ids is None else np.asarray(env_ids, dtype=np.intp)
        with self._lock:
            self.length[ids] = 0
            self.index[ids] = 0
            self.rows[ids] = 0

    def reset(self, env_ids: EnvIds | None = None) -> None:
        """A new episode for ``env_ids`` (all when ``None``): drop their chunks, request counts
        and latency records."""
        ids = range(self.num_envs) if env_ids is None else [int(e) for e in env_ids]
        with self._lock:
            for e in ids:
                self.length[e] = self.index[e] = self.requests[e] = 0
                self.rows[e] = 0
                self._latency_ms[e] = []
                self._server_infer_ms[e] = []

    # -- replaying -------------------------------------------------------------------------------
    def take(self, envs: np.ndarray | EnvIds, out: np.ndarray | None = None) -> np.ndarray:
        """The next row of each env in ``envs`` (a ``bool (N,)`` mask or env ids), advancing it.

        Returns ``out`` (``(N, A)``, rows cast to its dtype; the other envs' rows untouched)
        or, without ``out``, a new ``(N, A)`` array in the chunks' dtype with zero rows for
        the other envs.

        Raises:
            RuntimeError: an env in ``envs`` has no row left (it is due: put a chunk first);
                nothing is advanced then.
        """
        envs = np.asarray(envs)
        ids = np.flatnonzero(envs) if envs.dtype == bool else envs.astype(np.intp).reshape(-1)
        with self._lock:
            empty = ids[self.index[ids] >= self.length[ids]]
            if empty.size:
                raise RuntimeError(f"env(s) {empty.tolist()} have no chunk row left to replay")
            if out is None:
                out = np.zeros((self.num_envs, self.action_dim), self.rows.dtype)
            out[ids] = self.rows[ids, self.index[ids]]
            self.index[ids] += 1
        return out

    # -- records ---------------------------------------------------------------------------------
    def latency_ms(self, env_id: int) -> list[float]:
        """Latencies (ms) recorded for ``env_id`` since its last reset, in request order."""
        return list(self._latency_ms[env_id])

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``latency`` (:func:`~arena.policies.base.latency_stats` of the requests that served
        ``env_id`` since its reset) and ``server_timing`` (``infer_ms_mean``, ``infer_ms_max``
        of the server-reported times), each only when recorded; ``{}`` for an unknown env."""
        if not 0 <= env_id < self.num_envs:
            return {}
        out: dict[str, Any] = {}
        latency = self._latency_ms[env_id]
        if latency:
            out["latency"] = latency_stats(latency)
        infer = self._server_infer_ms[env_id]
        if infer:
            arr = np.asarray(infer)
            out["server_timing"] = {"infer_ms_mean": float(arr.mean()), "infer_ms_max": float(arr.max())}
        return out
