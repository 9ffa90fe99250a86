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
3a. Once a reconnect found no server, the server is marked gone (:class:`ServerWatch`, shared
   by every loop of one policy, so by every env and every later episode of the run): the
   next reconnects check once, waiting only ``recheck_timeout_s`` (a few seconds), until one
   finds a server again. A dead server thus costs one ``reconnect_timeout_s`` per run, not one
   per episode: the run reaches its consecutive-error limit within about one
   ``reconnect_timeout_s`` plus a few seconds per later episode.
3b. After every reconnect the server's identity (``identity(client)``: by default the
   metadata it sent on connect; GR00T asks for its modality config) is compared with what
   the first connect saw; a different one raises :class:`ServerChanged` naming the keys that
   changed (the connection is closed), and the request gives up: never infer against a
   server that came back with another model. Identities are compared by value (numpy
   arrays element-wise); ``identity=None`` compares nothing (a protocol that says nothing
   about its server, e.g. OpenVLA's ``deploy.py``).
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
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from arena.errors import TransportError
from arena.policies.adapters import ProtocolViolation
from arena.transport.errors import CodecError, ConnectionLost, ProtocolError, RemoteError
from arena.transport.interface import WireClient

__all__ = [
    "BACKOFF_MAX_S", "RECHECK_TIMEOUT_S", "ConnectionGaveUp", "ConnectionLoop", "Reply", "ServerChanged", "ServerWatch",
    "backoff_s", "is_retryable", "server_metadata",
]

T = TypeVar("T")
C = TypeVar("C", bound=WireClient)

#: Back-off before the first reconnect (seconds); it doubles per attempt up to BACKOFF_MAX_S.
BACKOFF_START_S = 0.2
#: The longest back-off before a reconnect (seconds); ``give_up_bound_s`` counts it per attempt.
BACKOFF_MAX_S = 2.0

#: Seconds a reconnect waits once an earlier reconnect of the same policy found no server.
RECHECK_TIMEOUT_S = 5.0

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


class ServerChanged(TransportError):
    """A reconnect reached a server whose identity differs from the first connect's (another
    model, embodiment or configuration behind the same endpoint); the message names the
    keys that changed, old and new value."""


@dataclass(eq=False)
class ServerWatch:
    """Whether the server of one policy is known to be gone, shared by all its loops.

    ``gone`` is the error of the last reconnect that found no server (``None``: none did, or
    a later one succeeded). Thread-safe enough for its use: a single reference assignment.
    """

    gone: BaseException | None = None


def server_metadata(client: WireClient) -> Any:
    """The default identity of a server: what it sent about itself on connect
    (:attr:`WireClient.metadata`: openpi's metadata frame, vla-eval's HELLO, DreamZero's
    greeting, GR00T's ``ping`` reply); ``None`` for a client that keeps none."""
    return getattr(client, "metadata", None)


def _comparable(value: Any) -> Any:
    """``value`` with numpy arrays (and dict/list nesting) turned into plain, ``==``-comparable data."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # numpy array or scalar
        return ("array", str(value.dtype), getattr(value, "shape", ()), value.tolist())
    return value


def _changes(before: Any, after: Any) -> str:
    """The difference of two identities, for :class:`ServerChanged`: ``'key': old -> new``
    per changed top-level key (at most 5), or the whole values when they are not mappings."""
    if not (isinstance(before, dict) and isinstance(after, dict)):
        return f"{before!r:.200} -> {after!r:.200}"
    missing = object()
    said = [
        f"{key!r}: {'(absent)' if old is missing else repr(old)[:120]} -> {'(absent)' if new is missing else repr(new)[:120]}"
        for key in sorted({*before, *after}, key=str)
        if _comparable(old := before.get(key, missing)) != _comparable(new := after.get(key, missing))
    ]
    more = f" (and {len(said) - 5} more)" if len(said) > 5 else ""
    return "; ".join(said[:5]) + more


@dataclass(eq=False)
class ConnectionLoop(Generic[C]):
    """Retries, reconnects and gives up for one :class:`WireClient` (see the module doc).

    Args:
        client: the connection; the loop opens and re-opens it.
        reconnect_timeout_s: seconds a reconnect waits for a server that went away.
        recheck_timeout_s: seconds a reconnect waits once ``watch`` says the server is gone
            (capped at ``reconnect_timeout_s``).
        max_reconnect_attempts: reconnects per :meth:`call` before it gives up (>= 0).
        retryable: which faults are worth a reconnect (default :func:`is_retryable`).
        on_connect: called with the client after every successful connect (the first and
            each reconnect); raising refuses that server (the client is closed, and the error
            propagates from :meth:`connect`, or makes a reconnect fail).
        on_fault: called with each fault about to be retried, before the reconnect: drop
            every buffered chunk here.
        sleep: the back-off's sleep (tests pass a recorder).
        identity: what identifies the server, read after every connect (default
            :func:`server_metadata`; ``None``: nothing is compared); see the module doc, 3b.
        watch: whether the server is known to be gone; pass one :class:`ServerWatch` to
            every loop of a policy (default: this loop's own).

    ``reconnects`` counts the reconnects that succeeded, ``reconnect_attempts`` every
    reconnect tried (the first connect is neither); ``server_identity`` is what the first
    connect's ``identity`` read. Not thread-safe: one loop per
    connection, driven by one thread at a time (several loops may run concurrently).

    Raises:
        ValueError: ``max_reconnect_attempts`` is negative.
    """

    client: C
    _: KW_ONLY
    reconnect_timeout_s: float
    max_reconnect_attempts: int
    retryable: Callable[[BaseException], bool] = is_retryable
    on_connect: Callable[[C], None] | None = None
    on_fault: Callable[[BaseException], None] | None = None
    sleep: Callable[[float], Any] = time.sleep
    recheck_timeout_s: float = RECHECK_TIMEOUT_S
    identity: Callable[[C], Any] | None = server_metadata
    watch: ServerWatch = field(default_factory=ServerWatch)
    reconnects: int = field(default=0, init=False)
    reconnect_attempts: int = field(default=0, init=False)
    server_identity: Any = field(default=None, init=False)
    _identified: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.max_reconnect_attempts < 0:
            raise ValueError(f"max_reconnect_attempts must be >= 0; got {self.max_reconnect_attempts}")

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Open the connection (``timeout_s``: ``None`` is the client's own connect timeout)
        check the server's identity (the first connect records it) and run ``on_connect``;
        returns the server's metadata.

        Raises:
            ServerChanged: the server's identity differs from the first connect's.
            TransportError: what the client's ``connect``, ``identity`` or ``on_connect``
                raised (the client is closed then).
        """
        metadata = self.client.connect(timeout_s=timeout_s)
        try:
            if self.identity is not None:
                seen = self.identity(self.client)
                if not self._identified:
                    self.server_identity, self._identified = seen, True
                elif _comparable(seen) != _comparable(self.server_identity):
                    raise ServerChanged(
                        f"{self.client.endpoint}: another server answered after the reconnect "
                        f"({_changes(self.server_identity, seen)})"
                    )
            if self.on_connect is not None:
                self.on_connect(self.client)
        except BaseException:
            self.client.close()  # never leave a connection to a server we refuse open
            raise
        return metadata

    def _reconnect_timeout_s(self) -> float:
        """``reconnect_timeout_s``, or the short ``recheck_timeout_s`` once the server is gone."""
        if self.watch.gone is None:
            return self.reconnect_timeout_s
        return min(self.recheck_timeout_s, self.reconnect_timeout_s)

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
            self.sleep(backoff_s(attempt))
            self.reconnect_attempts += 1
            try:
                self.connect(self._reconnect_timeout_s())  # a client's connect drops what is left of the old one
            except ServerChanged as changed:  # a server is there: not gone, but never used
                raise ConnectionGaveUp(fault, changed) from changed
            except TransportError as gone:
                if not isinstance(gone, NOT_RETRIED):  # no server answered (not: one answered wrongly)
                    self.watch.gone = gone
                raise ConnectionGaveUp(fault, gone) from gone
            self.watch.gone = None
            self.reconnects += 1

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.client.close()
