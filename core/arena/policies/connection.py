"""``ConnectionLoop``: one connection's connect / retry / reconnect / back-off / give-up.

Every remote policy asks its server through a :class:`~arena.transport.interface.WireClient`
wrapped in one of these loops: openpi and Cosmos (``RemoteChunkReplayPolicy``) one loop per
env, GR00T one loop whose requests carry every env (a batch), DreamZero one loop for its one
env. The loop knows nothing of envs or chunks; the policy hears about faults through
``on_fault`` (drop buffered action chunks: they came from a server that may have lost its
state or been restarted with another model) and about every (re)connect through
``on_connect`` (keep the new metadata, refuse a server it cannot use).

The rules, for one :meth:`ConnectionLoop.call`:

1. A connection that is not open (never opened, or dropped by an earlier fault) is re-opened
   first; this does not use up the give-up check (a connection dropped by the previous
   request that gave up gets one new try even with ``max_reconnect_attempts: 0``).
2. A fault that ``retryable`` accepts (by default any :class:`~arena.errors.TransportError`
   except :class:`~arena.transport.errors.ProtocolError`, :class:`CodecError`,
   :class:`RemoteError` and the adapters' :class:`ProtocolViolation`: the same request would
   fail the same way) is retried at most ``max_reconnect_attempts`` times; anything else is
   raised unchanged at once.
3. Before each retry: ``on_fault(fault)``, a back-off of ``0.2 * 2**(attempt-1)`` s (at most
   2 s), then the client connects again (dropping what is left of the old connection)
   waiting ``reconnect_timeout_s``. A reconnect
   that finds no server gives up at once (waiting as long again would not help).
4. Giving up raises :class:`ConnectionGaveUp` naming the last fault (and the failed
   reconnect); the policy turns it into a :class:`~arena.errors.PolicyError` for the envs the
   request served, whose episodes end as ``error``.

How long that takes at worst is :meth:`arena.policies.remote.RemotePolicyConfig.give_up_bound_s`:
the wire client decides how long one request or connect may wait (its request timeout, or the
first-request timeout after a server restart it noticed: :attr:`WireClient.saw_server_down`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

from arena.errors import TransportError
from arena.policies.adapters import ProtocolViolation
from arena.transport.errors import CodecError, ConnectionLost, ProtocolError, RemoteError
from arena.transport.interface import WireClient

__all__ = ["BACKOFF_MAX_S", "ConnectionGaveUp", "ConnectionLoop", "Reply", "backoff_s", "is_retryable"]

T = TypeVar("T")
C = TypeVar("C", bound=WireClient)

#: Back-off before the first reconnect (seconds); it doubles per attempt up to BACKOFF_MAX_S.
BACKOFF_START_S = 0.2
#: The longest back-off before a reconnect (seconds); ``give_up_bound_s`` counts it per attempt.
BACKOFF_MAX_S = 2.0

#: Faults the same request would meet again: never retried.
NOT_RETRIED: tuple[type[BaseException], ...] = (ProtocolError, CodecError, RemoteError, ProtocolViolation)


def is_retryable(exc: BaseException) -> bool:
    """The default rule: a :class:`TransportError` about the connection (not a malformed
    request or reply, not an error the server answered with) is worth a new connection."""
    return isinstance(exc, TransportError) and not isinstance(exc, NOT_RETRIED)


def backoff_s(attempt: int) -> float:
    """Seconds to wait before reconnect ``attempt`` (1-based): 0.2, 0.4, 0.8, 1.6, then 2."""
    return min(BACKOFF_MAX_S, BACKOFF_START_S * 2 ** (attempt - 1))


class Reply(NamedTuple, Generic[T]):
    """What :meth:`ConnectionLoop.call` returns: ``send``'s value and the wall-clock
    milliseconds of the attempt that produced it (for the ChunkBroker's latency records)."""

    value: T
    latency_ms: float


class ConnectionGaveUp(TransportError):
    """No reply after the allowed retries, or a reconnect found no server.

    ``fault`` is the last fault of a request; ``reconnect_error`` the error of the reconnect
    that failed (``None`` when the attempts ran out). The message is ``"<Fault>: <text>"`` or
    ``"reconnect failed: <Error>: <text> (after <Fault>: <text>)"``.
    """

    def __init__(self, fault: BaseException, reconnect_error: BaseException | None = None) -> None:
        said = f"{type(fault).__name__}: {fault}"
        if reconnect_error is not None:
            said = f"reconnect failed: {type(reconnect_error).__name__}: {reconnect_error} (after {said})"
        super().__init__(said)
        self.fault = fault
        self.reconnect_error = reconnect_error


class ConnectionLoop(Generic[C]):
    """Retries, reconnects and gives up for one :class:`WireClient` (see the module doc).

    Args:
        client: the connection; the loop opens, closes and re-opens it.
        reconnect_timeout_s: seconds a reconnect waits for a server that went away.
        max_reconnect_attempts: reconnects per :meth:`call` before it gives up (>= 0).
        retryable: which faults are worth a reconnect (default :func:`is_retryable`).
        on_connect: called with the client after every successful connect (the first and
            each reconnect); raising refuses that server (the client is closed, and the error
            propagates from :meth:`connect`, or makes a reconnect fail).
        on_fault: called with each fault about to be retried, before the reconnect: drop
            every buffered chunk here.
        sleep: the back-off's sleep (tests pass a recorder).

    ``reconnects`` counts the reconnects that succeeded. Not thread-safe: one loop per
    connection, driven by one thread at a time (several loops may run concurrently).
    """

    def __init__(
        self,
        client: C,
        *,
        reconnect_timeout_s: float,
        max_reconnect_attempts: int,
        retryable: Callable[[BaseException], bool] = is_retryable,
        on_connect: Callable[[C], None] | None = None,
        on_fault: Callable[[BaseException], None] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        if max_reconnect_attempts < 0:
            raise ValueError(f"max_reconnect_attempts must be >= 0; got {max_reconnect_attempts}")
        self.client = client
        self.reconnect_timeout_s = reconnect_timeout_s
        self.max_reconnect_attempts = max_reconnect_attempts
        self.retryable = retryable
        self.on_connect = on_connect
        self.on_fault = on_fault
        self._sleep = sleep
        self.reconnects = 0

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Open the connection (``timeout_s``: ``None`` is the client's own connect timeout)
        and run ``on_connect``; returns the server's metadata.

        Raises:
            TransportError: what the client's ``connect`` or ``on_connect`` raised (the
                client is closed then).
        """
        metadata = self.client.connect(timeout_s=timeout_s)
        if self.on_connect is not None:
            try:
                self.on_connect(self.client)
            except BaseException:
                self.client.close()  # never leave a connection to a server we refuse open
                raise
        return metadata

    def call(self, send: Callable[[C], T]) -> Reply[T]:
        """Run ``send(client)`` (one request and its reply, decoded and checked) until it
        returns, re-opening the connection on retryable faults.

        Raises:
            ConnectionGaveUp: the attempts ran out, or a reconnect failed.
            whatever ``send`` raised that is not retryable (e.g. ProtocolError, RemoteError).
        """
        attempt = 0
        while True:
            client = self.client
            if client.connected:
                started = time.perf_counter()
                try:
                    value = send(client)
                except Exception as exc:
                    if not self.retryable(exc):
                        raise
                    if attempt >= self.max_reconnect_attempts:
                        raise ConnectionGaveUp(exc) from exc
                    fault: BaseException = exc
                else:
                    return Reply(value, (time.perf_counter() - started) * 1e3)
            else:
                fault = ConnectionLost(f"{client.endpoint}: not connected")
            attempt += 1
            if self.on_fault is not None:
                self.on_fault(fault)
            self._sleep(backoff_s(attempt))
            try:
                self.connect(self.reconnect_timeout_s)  # a client's connect drops what is left of the old one
            except TransportError as gone:
                raise ConnectionGaveUp(fault, gone) from gone
            self.reconnects += 1

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.client.close()
