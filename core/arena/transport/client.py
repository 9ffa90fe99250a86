"""Synchronous client for openpi-style policy servers (arena's own, openpi's, DreamZero's);
a :class:`arena.transport.interface.WireClient`.

Protocol (``reference/protocols.md`` section 2): on connect the server sends one binary
metadata frame; then strictly one request, one reply. A text frame from the server is its
traceback, followed by close code 1011. Every timeout is explicit; nothing retries forever.

    client = PolicyClient("127.0.0.1", 8000)
    metadata = client.connect()
    reply = client.infer({"observation/state": np.zeros(8, np.float32), "prompt": "..."})
    client.close()
"""

from __future__ import annotations

import threading
import time
from typing import Any

from websockets.exceptions import (
    ConnectionClosed,
    InvalidHandshake,
    InvalidStatus,
    InvalidURI,
)
from websockets.client import process_exception as _fatal_handshake_error
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from arena.transport.codec import Packer, unpackb
from arena.transport.errors import (
    ConnectionLost,
    HandshakeError,
    InternalServerError,
    KeepaliveTimeout,
    MissingMetadata,
    NonMapReply,
    ProtocolError,
    RequestTimeout,
    ServerTraceback,
    ServerUnavailable,
    StringReply,
    TransportError,
    Unauthorized,
    UnexpectedTextFrame,
)

__all__ = ["PolicyClient", "endpoint_uri"]

_KEEPALIVE_REASON = "keepalive ping timeout"
_BACKOFF_START_S = 0.1
_BACKOFF_MAX_S = 2.0
_CLOSE_TIMEOUT_S = 1.0
# Close codes before the metadata frame that mean the server is going down or restarting
# (RFC 6455 1001 going away; IANA 1012 service restart, 1013 try again later): retried too.
_TRANSIENT_CLOSE_CODES = frozenset({1001, 1012, 1013})
# After a text frame, how long to wait for the close 1011 that makes it openpi's error sequence.
_TRACEBACK_CLOSE_WAIT_S = 1.0

def _supported_connect_options() -> frozenset[str]:
    import inspect

    try:
        return frozenset(inspect.signature(ws_connect).parameters)
    except (TypeError, ValueError):  # pragma: no cover
        return frozenset()


# websockets < 15 has no proxy/keepalive options in the sync client (and ignores proxies);
# websockets >= 17.1 warns unless the historical connect() behaviour is asked for explicitly.
_CONNECT_OPTIONS = _supported_connect_options()
_LEGACY_KW: dict[str, Any] = {"legacy": True} if "legacy" in _CONNECT_OPTIONS else {}


def endpoint_uri(host: str, port: int | None) -> str:
    """``ws://host:port``; a host that already starts with ``ws://``/``wss://`` is kept as-is."""
    if host.startswith(("ws://", "wss://")):
        return host
    return f"ws://{host}:{port}" if port is not None else f"ws://{host}"


class _GoingAway(Exception):
    """The server closed with a going-away code before its metadata frame; ``error`` is what
    :meth:`PolicyClient.connect` raises when the deadline leaves no time to try again."""

    def __init__(self, error: MissingMetadata) -> None:
        super().__init__(str(error))
        self.error = error


class PolicyClient:
    """One WebSocket connection to a policy server; not for use from several threads at once.

    Args:
        host, port: the server; ``host`` may be a full ``ws://``/``wss://`` URI.
        api_key: sent as ``Authorization: Api-Key <key>``.
        connect_timeout_s: seconds for :meth:`connect` as a whole: TCP connect (refused
            connections are retried with backoff 0.1 s doubling to 2 s), handshake and the
            metadata frame (a server still loading its model sends it late).
        request_timeout_s: seconds to wait for each reply.
        first_request_timeout_s: seconds for the first inference after the server started
            (it may compile for minutes); ``None`` uses ``request_timeout_s``. "Started" is
            what this client can tell: before its first reply; after a connection dropped
            without a close frame (the server process died: the kernel closed its socket);
            after a :meth:`connect` that found the server down (connection refused) before
            it answered again; after :meth:`expect_warmup`. Reconnecting to a server that
            stayed up does not reset it, so a hung server costs ``request_timeout_s`` per
            attempt, not more.
        ping_interval_s, ping_timeout_s: keepalive; ``None`` disables it.
        max_message_bytes: largest reply accepted; ``None`` for no limit.

    After :meth:`connect`, :attr:`saw_server_down` says whether the server refused
    connections on the way (it was restarting); :attr:`server_warm` whether an inference has
    been answered since the server last (re)started.
    """

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        api_key: str | None = None,
        connect_timeout_s: float = 60.0,
        request_timeout_s: float = 60.0,
        first_request_timeout_s: float | None = None,
        ping_interval_s: float | None = 30.0,
        ping_timeout_s: float | None = 300.0,
        max_message_bytes: int | None = 64 * 2**20,
    ) -> None:
        self.host = host
        self.port = port
        self.endpoint = endpoint_uri(host, port)
        self.api_key = api_key
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_request_timeout_s = first_request_timeout_s
        self.ping_interval_s = ping_interval_s
        self.ping_timeout_s = ping_timeout_s
        self.max_message_bytes = max_message_bytes
        self.metadata: dict[str, Any] | None = None
        self._conn: ClientConnection | None = None
        self._packer = Packer()
        self._lock = threading.Lock()
        self.server_warm = False
        self.saw_server_down = False
        self._version_options: dict[str, Any] = dict(_LEGACY_KW)
        if "proxy" in _CONNECT_OPTIONS:
            self._version_options["proxy"] = None
        if "ping_interval" in _CONNECT_OPTIONS:
            self._version_options["ping_interval"] = ping_interval_s
            self._version_options["ping_timeout"] = ping_timeout_s

    # ---- connection ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Open the connection and read the metadata frame; returns (and stores) the metadata.

        ``timeout_s`` replaces ``connect_timeout_s`` for this call (e.g. a reconnect's wait).

        Raises:
            ServerUnavailable: nothing accepted the connection within ``connect_timeout_s``.
            Unauthorized: the server answered the handshake with HTTP 401 or 403.
            HandshakeError: the handshake failed (bad HTTP status, not a WebSocket server)
                or timed out. What websockets deems transient (``websockets.client.
                process_exception``: HTTP 500, 502, 503 and 504 — a proxy whose backend
                restarts, a server shutting down or at its connection cap — and a connection
                closed before any HTTP answer) is retried until the deadline first.
            MissingMetadata: no metadata frame came in time, the server closed before
                sending one (after a going-away close 1001, 1012 or 1013: only once the
                deadline leaves no time to connect again), or the frame is not a map.
            ServerTraceback: the server sent its traceback (then close 1011) instead.
            InternalServerError: the server closed with 1011 without a traceback.
            UnexpectedTextFrame: a text frame not followed by close 1011.
            ProtocolError: the metadata frame is not decodable.
        """
        with self._lock:
            self._discard()
            self.saw_server_down = False
            budget = self.connect_timeout_s if timeout_s is None else timeout_s
            deadline = time.monotonic() + budget
            conn, metadata = self._open(deadline, budget)
            self._conn = conn
            if self.saw_server_down:
                self.server_warm = False  # a restarted server warms up (compiles) again
            self.metadata = metadata
            return metadata

    def _open(self, deadline: float, budget: float) -> tuple[ClientConnection, dict[str, Any]]:
        """A connection to the server and its metadata, before ``deadline`` (monotonic s).

        A server not up yet, or answering "not now", is tried again with back-off; if time
        runs out, its last "not now" answer is raised (else :class:`ServerUnavailable`).
        """
        headers = {"Authorization": f"Api-Key {self.api_key}"} if self.api_key else None
        delay = _BACKOFF_START_S
        refused: TransportError | None = None
        while True:
            remaining = deadline - time.monotonic()
            try:
                conn = ws_connect(
                    self.endpoint,
                    additional_headers=headers,
                    compression=None,
                    open_timeout=max(remaining, 0.001),
                    close_timeout=_CLOSE_TIMEOUT_S,
                    max_size=self.max_message_bytes,
                    **self._version_options,
                )
            except TimeoutError as exc:
                if "handshake" in str(exc) and refused is None:
                    raise HandshakeError(
                        f"{self.endpoint}: handshake timed out after "
                        f"{budget:.3g} s "
                        f"(is the server's event loop blocked?)"
                    ) from exc
                raise (refused or self._unavailable(exc, budget)) from exc
            except InvalidStatus as exc:
                status = exc.response.status_code
                if status in (401, 403):
                    sent = "with a key" if self.api_key else "without one"
                    raise Unauthorized(
                        f"{self.endpoint}: server answered the handshake with HTTP {status} "
                        f"(missing or wrong api_key: this client connected {sent})"
                    ) from exc
                body = (exc.response.body or b"")[:300].decode("utf-8", "replace").strip()
                answer = f"{self.endpoint}: server answered the handshake with HTTP {status}{': ' + body if body else ''}"
                if _fatal_handshake_error(exc) is not None:
                    raise HandshakeError(answer) from exc
                refused = HandshakeError(f"{answer} (still after retrying for {budget:.3g} s)")
                refused.__cause__ = last = exc
            except (InvalidHandshake, InvalidURI) as exc:
                hint = "(is a WebSocket policy server listening there? an openpi or arena server answers GET /healthz with OK)"
                if isinstance(exc, InvalidURI) or _fatal_handshake_error(exc) is not None:
                    cause = f" ({type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ else ""
                    raise HandshakeError(f"{self.endpoint}: handshake failed: {exc}{cause} {hint}") from exc
                # The connection closed before any HTTP answer: a server going down as we came.
                refused = HandshakeError(
                    f"{self.endpoint}: the server closed every connection before answering the handshake "
                    f"(still after retrying for {budget:.3g} s) {hint}"
                )
                refused.__cause__ = last = exc
            except OSError as exc:  # ConnectionRefusedError and friends: server not up yet
                last = exc
            else:
                try:
                    return conn, self._read_metadata(conn, deadline, budget)
                except BaseException as exc:
                    self._conn = conn
                    self._discard()
                    if not isinstance(exc, _GoingAway):
                        raise
                    refused, last = exc.error, exc.error.__cause__ or exc.error  # going down as we came
            # Not up yet, or "not now": back off and try again until the deadline.
            self.saw_server_down = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise (refused or self._unavailable(last, budget)) from last
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _BACKOFF_MAX_S)

    def _unavailable(self, exc: BaseException, budget: float) -> ServerUnavailable:
        return ServerUnavailable(
            f"{self.endpoint}: no server accepted the connection within "
            f"{budget:.3g} s (last error: {exc})"
        )

    def _read_metadata(self, conn: ClientConnection, deadline: float, budget: float) -> dict[str, Any]:
        remaining = max(deadline - time.monotonic(), 0.001)
        try:
            frame = conn.recv(timeout=remaining)
        except TimeoutError as exc:
            raise MissingMetadata(
                f"{self.endpoint}: no metadata frame within {budget:.3g} s of "
                f"connecting (is the model still loading? is this an openpi-protocol server?)"
            ) from exc
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            if rcvd is not None and rcvd.code in (1000, *_TRANSIENT_CLOSE_CODES):
                missing = MissingMetadata(
                    f"{self.endpoint}: server closed the connection (code {rcvd.code}: "
                    f"{rcvd.reason or '-'}) without sending the metadata frame"
                )
                missing.__cause__ = exc
                if rcvd.code in _TRANSIENT_CLOSE_CODES:
                    raise _GoingAway(missing) from exc
                raise missing
            raise self._closed_error(exc, before="the metadata frame") from exc
        if isinstance(frame, str):
            raise self._text_frame_error(conn, frame, "instead of the metadata frame")
        try:
            metadata = unpackb(frame)
        except TransportError as exc:
            raise ProtocolError(f"{self.endpoint}: undecodable metadata frame: {exc}") from exc
        if not isinstance(metadata, dict):
            raise MissingMetadata(
                f"{self.endpoint}: the metadata frame is a {type(metadata).__name__}, not a map"
            )
        return metadata

    def _text_frame_error(
        self, conn: ClientConnection, text: str, where: str
    ) -> ServerTraceback | UnexpectedTextFrame:
        """Classify a text frame: openpi's error sequence if close 1011 follows promptly."""
        try:
            conn.recv(timeout=_TRACEBACK_CLOSE_WAIT_S)
        except ConnectionClosed as exc:
            if exc.rcvd is not None and exc.rcvd.code == 1011:
                return ServerTraceback(
                    f"{self.endpoint}: server error {where} (traceback, then close 1011):\n"
                    f"{text}",
                    text,
                )
        except Exception:  # noqa: BLE001 - timeout or a further frame: not the error sequence
            pass
        shown = text if len(text) <= 500 else text[:500] + "..."
        return UnexpectedTextFrame(
            f"{self.endpoint}: unexpected text frame {where} (not followed by close 1011): "
            f"{shown!r}",
            text,
        )

    def close(self) -> None:
        """Close the connection (normal closure); safe to call any number of times."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken socket is best effort
                pass

    def _discard(self) -> None:
        """Drop the connection without a closing handshake (it is broken or out of sync)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        close_socket = getattr(conn, "close_socket", None)
        try:
            if close_socket is not None:
                close_socket()
            else:  # pragma: no cover - websockets < 14
                conn.close()
        except Exception:  # noqa: BLE001
            pass

    def __enter__(self) -> PolicyClient:
        if self._conn is None:
            self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests -----------------------------------------------------------------------

    def expect_warmup(self) -> None:
        """Give the next inference ``first_request_timeout_s``: the server was restarted (e.g.
        another connection to it saw it down)."""
        self.server_warm = False

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: openpi's protocol has no episode boundary (its client's ``reset`` is local)."""

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: openpi's protocol has no episode boundary."""

    def request(self, message: dict[str, Any], *, inference: bool = True) -> Any:
        """Send one message and return the decoded reply (any msgpack value).

        ``inference``: the message runs the model. The first inference after a server start
        waits ``first_request_timeout_s`` and its reply marks the server warm; other messages
        (a protocol's reset) always wait ``request_timeout_s``.

        Raises:
            CodecError: ``message`` holds a value that cannot travel (nothing was sent).
            RequestTimeout: no reply in time; the connection is closed.
            ServerTraceback: the server sent its traceback, then closed with 1011.
            UnexpectedTextFrame: a text frame without the close 1011 (see
                :meth:`_on_text_frame`).
            InternalServerError: the server closed with 1011 without a traceback.
            ConnectionLost / KeepaliveTimeout: the connection dropped; reconnect.
            ProtocolError: the reply was too big or not decodable.
        """
        with self._lock:
            payload = self._packer.pack(message)  # CodecError before anything is sent
            conn = self._conn
            if conn is None:
                raise ConnectionLost(f"{self.endpoint}: not connected (call connect() first)")
            first = inference and not self.server_warm and self.first_request_timeout_s is not None
            timeout = self.first_request_timeout_s if first else self.request_timeout_s
            try:
                conn.send(payload)
                reply = conn.recv(timeout=timeout)
            except TimeoutError as exc:
                self._discard()
                raise RequestTimeout(
                    f"{self.endpoint}: no reply within {timeout:.3g} s"
                    f"{' (first inference after the server started)' if first else ''}; "
                    f"connection closed"
                ) from exc
            except ConnectionClosed as exc:
                self._discard()
                error = self._closed_error(exc)
                if exc.rcvd is None and not isinstance(error, KeepaliveTimeout):
                    self.server_warm = False  # its process died: back, it warms up again
                raise error from exc
            except OSError as exc:
                self._discard()
                self.server_warm = False  # reset by the peer: its process died, most likely
                raise ConnectionLost(f"{self.endpoint}: connection failed: {exc}") from exc
            if reply.__class__ is str:
                return self._on_text_frame(reply)
            if inference:
                self.server_warm = True
        try:
            return unpackb(reply)
        except TransportError as exc:
            raise ProtocolError(f"{self.endpoint}: undecodable reply: {exc}") from exc

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        """:meth:`request` that requires a map reply.

        Raises (besides :meth:`request`'s errors):
            StringReply: the reply is a msgpack string.
            NonMapReply: the reply is any other non-map value.
        """
        reply = self.request(obs)
        if reply.__class__ is dict:
            return reply
        if isinstance(reply, str):
            shown = reply if len(reply) <= 500 else reply[:500] + "..."
            raise StringReply(f"{self.endpoint}: expected a map reply, got a string: {shown!r}", reply)
        if isinstance(reply, dict):
            return reply
        raise NonMapReply(
            f"{self.endpoint}: expected a map reply, got {type(reply).__name__}", reply
        )

    def _on_text_frame(self, text: str) -> Any:
        """Handle a text frame received instead of a binary reply. Runs with the request lock
        held; the returned value becomes :meth:`request`'s result.

        By default the connection is dropped and, if close 1011 follows within a second,
        :class:`ServerTraceback` is raised (openpi's error sequence), else
        :class:`UnexpectedTextFrame`. Subclasses whose protocol defines a text acknowledgement
        (DreamZero answers ``reset`` with ``"reset successful"``) return a value instead.
        """
        conn = self._conn
        error = (
            self._text_frame_error(conn, text, "instead of a reply")
            if conn is not None
            else UnexpectedTextFrame(f"{self.endpoint}: unexpected text frame: {text!r}", text)
        )
        self._discard()
        raise error

    def _closed_error(self, exc: ConnectionClosed, before: str | None = None) -> TransportError:
        rcvd, sent = exc.rcvd, exc.sent
        where = f" before {before}" if before else ""
        if (sent is not None and sent.reason == _KEEPALIVE_REASON) or (
            rcvd is not None and rcvd.reason == _KEEPALIVE_REASON
        ):
            return KeepaliveTimeout(
                f"{self.endpoint}: keepalive ping timeout{where} (no pong within "
                f"{self.ping_timeout_s} s); reconnect"
            )
        if rcvd is not None and rcvd.code == 1011:
            return InternalServerError(
                f"{self.endpoint}: server closed the connection with 1011 (internal error)"
                f"{where}: {rcvd.reason or '-'}",
                rcvd.reason,
            )
        if rcvd is not None and rcvd.code == 1009:
            return ProtocolError(
                f"{self.endpoint}: server refused the message as too big (close 1009: "
                f"{rcvd.reason or '-'}); raise the server's message limit or send smaller "
                f"observations"
            )
        if sent is not None and sent.code == 1009:
            return ProtocolError(
                f"{self.endpoint}: reply over max_message_bytes={self.max_message_bytes}: "
                f"{sent.reason}"
            )
        if rcvd is None:
            detail = "connection dropped without a close frame"
        else:
            detail = f"server closed the connection (code {rcvd.code}: {rcvd.reason or '-'})"
        return ConnectionLost(f"{self.endpoint}: {detail}{where}; reconnect")
