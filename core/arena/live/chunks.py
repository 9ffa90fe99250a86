"""How live mode obtains a whole action chunk from any policy (the one seam to the policies).

Three kinds of policy, one call (:meth:`ChunkSource.request`):

- a policy with a :class:`~arena.policies.chunks.ChunkBroker` (every remote client: openpi,
  Cosmos, GR00T, DreamZero, LeRobot): the envs' cached rows are discarded, the policy asks its
  server for those envs exactly as it does in sync mode (its connection loop, retries and
  latency records), and the chunk is read back from the broker. Its ``open_loop_horizon`` is
  raised before ``start`` so the broker keeps every row live mode may execute. Extra request
  fields (RTC's) go in through the adapter, per env;
- a local policy with ``get_action_chunk(env, observation) -> (num_envs, H, A)`` (rows for
  active envs; e.g. the Kinetix baseline): called as is;
- any other local policy: its one action per env, repeated for ``rows`` rows (a policy that
  replans every ``execute_horizon`` steps, holding its target in between); so is a remote
  server's chunk of one row (a server that answers one action per observation).

The policy is told that only the requesting envs are active for the call
(:meth:`~arena.policies.base.PolicyBase.set_active`), so it computes (and advances per-env
state) for those alone: an episode's actions never depend on which other envs were due.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from arena.policies.chunks import ChunkBroker


def _broker(policy: Any) -> ChunkBroker | None:
    """The policy's chunk broker: its own (openpi, Cosmos, DreamZero, LeRobot) or its action
    scheduler's (GR00T, whose broker keeps the config's ``open_loop_horizon`` rows: set it to at
    least ``execute_horizon`` plus the largest delay)."""
    for owner in (policy, getattr(policy, "scheduler", None)):
        broker = getattr(owner, "broker", None)
        if isinstance(broker, ChunkBroker):
            return broker
    return None


def prepare(policy: Any, rows: int) -> None:
    """Before ``policy.start``: let a chunk-replaying policy keep at least ``rows`` rows per chunk."""
    horizon = getattr(policy, "open_loop_horizon", None)
    if isinstance(horizon, int) and horizon < rows:
        policy.open_loop_horizon = rows


class _ExtraFields:
    """An embodiment adapter whose requests carry extra fields for some envs.

    The remote clients build each env's request as ``pack_request(extract(observation, i),
    task)``, one env at a time, before sending any: the env id of ``extract`` picks the fields
    ``pack_request`` adds. Every other attribute is the wrapped adapter's.
    """

    def __init__(self, adapter: Any, fields: dict[int, dict[str, Any]]) -> None:
        self._adapter, self._fields, self._env = adapter, fields, None

    def extract(self, observation: Any, env_id: int) -> Any:
        self._env = int(env_id)
        return self._adapter.extract(observation, env_id)

    def pack_request(self, *args: Any, **kwargs: Any) -> Any:
        request = self._adapter.pack_request(*args, **kwargs)
        extra = self._fields.get(self._env) if self._env is not None else None
        if extra and isinstance(request, dict):
            request = {**request, **extra}
        return request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._adapter, name)


class ChunkSource:
    """Whole chunks of ``policy`` for chosen envs (module docstring).

    Args:
        policy: a started :class:`~arena.policies.base.PolicyBase`.
        rows: rows of the chunk made from a one-action policy.
    """

    def __init__(self, policy: Any, rows: int) -> None:
        self.policy = policy
        self.rows = rows
        self.lock = threading.Lock()  # a measured clock requests from a background thread

    def request(
        self, env: Any, observation: Any, env_ids: list[int], active: list[int] | None,
        fields: dict[int, dict[str, Any]] | None = None,
    ) -> dict[int, np.ndarray]:
        """``{env_id: float64 (H, A)}`` for ``env_ids``; ``active``: the envs to declare active
        again afterwards (``None``: all). ``fields``: extra request fields per env (remote only).

        Raises:
            arena.errors.PolicyError: as the policy's ``get_action`` raises it.
        """
        policy = self.policy
        with self.lock:
            policy.set_active(env_ids)
            try:
                broker = _broker(policy)
                if broker is not None:
                    broker.discard(env_ids)
                    adapter = getattr(policy, "adapter", None)
                    if fields and adapter is not None:
                        policy.adapter = _ExtraFields(adapter, fields)
                    try:
                        policy.get_action(env, observation)
                    finally:
                        if fields and adapter is not None:
                            policy.adapter = adapter
                    chunks = {e: np.array(broker.rows[e, : broker.length[e]], np.float64) for e in env_ids}
                    # a server answering one action per observation (Meta-World's expert, vla-eval,
                    # OpenVLA) is a per-step policy: its action is held for the chunk, as a local
                    # one's is; a one-row chunk would leave nothing for rows d .. s-1 to execute
                    return {e: np.repeat(c, self.rows, axis=0) if len(c) == 1 else c for e, c in chunks.items()}
                chunk_fn = getattr(policy, "get_action_chunk", None)
                if callable(chunk_fn):
                    chunks = np.asarray(chunk_fn(env, observation), np.float64)
                    return {e: chunks[e] for e in env_ids}
                actions = np.asarray(policy.get_action(env, observation), np.float64)
                return {e: np.repeat(actions[e][None], self.rows, axis=0) for e in env_ids}
            finally:
                policy.set_active(range(env.num_envs) if active is None else active)
