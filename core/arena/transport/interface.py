"""``WireClient``: what one connection to one policy server offers, whatever its wire protocol.

A policy's per-env reconnect, retry, back-off and give-up are written once, in
:class:`arena.policies.connection.ConnectionLoop`, against this interface; a wire protocol
only says how to open a connection, send one request and read one reply. Implementations:

* :class:`arena.transport.client.PolicyClient` — openpi's websocket protocol (arena's own
  server, openpi's ``serve_policy.py``, Cosmos); openpi-client keeps the same split
  (``BasePolicy.infer``/``reset`` apart from the ``ActionChunkBroker`` that wraps it);
* ``arena_dreamzero.client.DreamZeroClient`` — openpi's transport with DreamZero's
  ``endpoint`` field and its ``reset`` acknowledgement (one session per episode);
* ``arena_gr00t.client.Gr00tClient`` — GR00T's ZeroMQ REQ/REP protocol; one request
  carries every env's observation (a batch), so one connection serves all envs.

The errors tell the loop what to do (``arena.transport.errors``): a
:class:`~arena.errors.TransportError` about the connection (:class:`ConnectionLost`,
:class:`RequestTimeout`, :class:`ServerUnavailable`, ...) is worth a reconnect and a retry;
:class:`ProtocolError`, :class:`CodecError` and :class:`RemoteError` (the server answered
with an error message) say the same request would fail again, so they end the env's episode
as ``error`` at once. docs/writing-a-plugin.md ("Adding a wire protocol") walks through a new
implementation and its tests.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["WireClient"]


@runtime_checkable
class WireClient(Protocol):
    """One connection to one policy server; used from one thread at a time.

    Attributes:
        endpoint: where the server is, for messages (``ws://host:port``, ``tcp://host:port``).
        saw_server_down: the latest :meth:`connect` found nothing listening at first (the
            server was (re)starting), so its first inference may take the warm-up time.
        metadata: what the server sent about itself on the latest :meth:`connect` (openpi's
            metadata frame, DreamZero's greeting, GR00T's ``ping`` reply); ``None`` before.
    """

    endpoint: str
    saw_server_down: bool
    metadata: dict[str, Any] | None

    @property
    def connected(self) -> bool:
        """Whether :meth:`connect` succeeded and nothing closed the connection since (a
        request that failed on a dropped connection may clear it)."""
        ...

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Open the connection (and handshake), waiting up to ``timeout_s`` (``None``: the
        client's own connect timeout) for a server that is still starting; returns and
        stores the server's metadata.

        Raises:
            arena.errors.TransportError: nothing answered in time
                (:class:`~arena.transport.errors.ServerUnavailable`), or the server refused
                (e.g. :class:`~arena.transport.errors.Unauthorized`).
        """
        ...

    def infer(self, request: dict[str, Any]) -> Any:
        """Send one request and return the decoded reply (its shape is the protocol's).

        The first inference after the server (re)started may wait the client's first-request
        timeout (a model compiles on its first call); later ones the request timeout.

        Raises:
            arena.errors.TransportError: connection faults (retried on a new connection).
            arena.transport.errors.ProtocolError, CodecError: a malformed reply or a request
                that cannot be encoded (never retried).
            arena.transport.errors.RemoteError: the server answered with an error message
                (never retried).
        """
        ...

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Env ``env_id`` starts an episode (openpi: nothing; DreamZero: a server ``reset``)."""
        ...

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Env ``env_id``'s episode ended (openpi: nothing)."""
        ...

    def expect_warmup(self) -> None:
        """Give the next inference the first-request timeout: the server was restarted (e.g.
        another connection to it found it down)."""
        ...

    def close(self) -> None:
        """Close the connection; idempotent, never blocks on undelivered requests."""
        ...
