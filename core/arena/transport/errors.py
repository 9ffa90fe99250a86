"""The wire errors of :mod:`arena.transport`; all subclass :class:`arena.errors.TransportError`.

Every message names the endpoint (``ws://host:port``) it concerns. Which ones are worth a
retry on a fresh connection: :class:`ConnectionLost` (and so :class:`KeepaliveTimeout`),
:class:`ServerUnavailable` and :class:`RequestTimeout`. :class:`ProtocolError`,
:class:`CodecError` and :class:`RemoteError` say the same request would fail again
(:class:`arena.policies.connection.ConnectionLoop` never retries them); whether a
:class:`ServerError` (openpi's traceback and close 1011) is worth a retry is the policy's call.
"""

from __future__ import annotations

from arena.errors import TransportError

__all__ = [
    "CodecError",
    "ConnectionLost",
    "HandshakeError",
    "InternalServerError",
    "KeepaliveTimeout",
    "MissingMetadata",
    "NonMapReply",
    "NotReady",
    "ProtocolError",
    "ReadinessTimeout",
    "RemoteError",
    "RequestTimeout",
    "ServerError",
    "ServerTraceback",
    "ServerUnavailable",
    "StringReply",
    "TransportError",
    "Unauthorized",
    "UnexpectedTextFrame",
]


class CodecError(TransportError, ValueError):
    """A message cannot be encoded (refused dtype or type) or decoded (malformed bytes).

    Encoding errors are raised before anything is sent and name the key path, e.g.
    ``observation/image: complex128 is not supported``.
    """


class ServerError(TransportError):
    """The server failed while handling a request: it sent a text frame (its traceback) and/or
    closed the connection with code 1011. ``traceback`` holds the server's text, or ``None``.
    The connection is unusable afterwards."""

    def __init__(self, message: str, traceback: str | None = None) -> None:
        super().__init__(message)
        self.traceback = traceback


class RemoteError(TransportError):
    """The server answered the request with an error message instead of a result (GR00T's
    ``{"error": ...}``, vla-eval's error reply): the connection is fine and the same request
    would fail again, so it is never retried; the env's episode is an ``error``."""


class ServerTraceback(ServerError):
    """openpi's error sequence: a text frame holding the server's Python traceback, then close
    1011 ("Internal server error. Traceback included in previous frame."). ``traceback`` is the
    text (``reference/protocols.md`` section 2.6)."""


class InternalServerError(ServerError):
    """The server closed the connection with 1011 (internal error) without sending a traceback
    first (``traceback`` is ``None``); ``reason`` is the close reason."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message, None)
        self.reason = reason


class ConnectionLost(TransportError):
    """The connection dropped, was closed by the peer or was never opened; retryable on a new
    connection. Any action chunk received over the old connection is stale."""


class KeepaliveTimeout(ConnectionLost):
    """No pong came back within ``ping_timeout_s``; the connection was failed with 1011."""


class HandshakeError(TransportError):
    """The WebSocket handshake failed or timed out: bad HTTP response (e.g. 401 for a wrong
    API key, 426), something that is not a policy server on the port, or a proxy error."""


class Unauthorized(HandshakeError):
    """The server refused the credentials: HTTP 401 or 403 on the handshake (or a readiness
    GET), or GR00T's ``Unauthorized`` error reply. Retrying with the same key cannot help:
    check ``api_key_env`` (the variable it names must hold the server's key)."""


class ServerUnavailable(TransportError):
    """Nothing accepted the TCP connection before ``connect_timeout_s`` ran out."""


class RequestTimeout(TransportError):
    """No reply came within the request timeout. The connection is closed: a late reply would
    otherwise be taken for the answer to the next request."""


class ProtocolError(TransportError):
    """The peer broke the protocol: a text reply where none is expected, a non-map reply where
    a map is required, no metadata frame, or a message over the size limit."""


class UnexpectedTextFrame(ProtocolError):
    """The server sent a text frame that was not followed by close 1011, so it is not openpi's
    error sequence (e.g. a DreamZero acknowledgement to a client that does not expect one).
    ``text`` holds the frame; the connection is dropped (it is out of step)."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


class StringReply(ProtocolError):
    """A binary reply decoded to a msgpack **string** where a map of arrays was expected
    (some servers report errors this way). ``text`` holds it; the connection stays usable."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


class NonMapReply(ProtocolError):
    """A binary reply decoded to something other than a map or a string (a bare array, a list,
    a number). ``reply`` holds the decoded value; the connection stays usable."""

    def __init__(self, message: str, reply: object) -> None:
        super().__init__(message)
        self.reply = reply


class MissingMetadata(ProtocolError):
    """No metadata frame after the handshake: none came within ``connect_timeout_s``, the
    server closed the connection normally before sending one, or the frame is not a map."""


class NotReady(TransportError):
    """One readiness probe found the server not (yet) ready; the cause is chained."""


class ReadinessTimeout(TransportError):
    """The server did not become ready in time, or ``should_abort`` gave a reason to stop."""
