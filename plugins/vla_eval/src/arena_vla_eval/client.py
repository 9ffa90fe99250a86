"""The vla-eval model-server client: one websocket, one vla-eval session, one env.

Protocol (vla-eval 0.8.0 ``vla_eval/model_servers/serve.py`` and ``connection.py``;
``reference/live-and-protocols.md`` C1-C8):

* after the websocket opens, the client sends HELLO ``{harness_version, protocol_version: 1,
  benchmark?}``; the server answers HELLO ``{harness_version, protocol_version,
  model_server: <class name>, capabilities, observation_params?, action_spec?,
  observation_spec?}`` -- that answer is this client's :attr:`metadata`;
* EPISODE_START ``{"task": {...}}`` (as vla-eval's ``SyncEpisodeRunner`` sends it,
  ``runners/sync_runner.py`` l.44-53: no ``mode``) opens a new server-side episode (new
  episode id, step 0, chunk buffer dropped); EPISODE_END carries the episode's result. Neither
  is answered, except that a failing ``on_episode_start`` answers ERROR;
* OBSERVATION -> ACTION ``{"actions": (action_dim,)}``, the reply echoing the observation's
  ``seq``: **one action per observation**; a chunking model's chunk stays in the server's
  per-session buffer;
* a model exception -> ERROR ``{"error": "observation_failed: ..."}`` echoing the ``seq``; the
  connection stays open.

What arena adds: explicit timeouts (the transport is :class:`arena.transport.PolicyClient`'s:
back-off while the server is not up, request timeouts, keepalive, typed errors), ``seq``
checked strictly (a reply for another ``seq`` drops the connection: it is out of step), and an
episode that survives a reconnect: :meth:`connect` re-sends the open episode's EPISODE_START,
so a restarted server never serves an episode it was not told about (vla-eval's own
``listening`` loop gives up instead). An ERROR reply raises :class:`RemoteError` and keeps the
connection.
"""

from __future__ import annotations

import time
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from arena.transport.client import PolicyClient
from arena.transport.codec import unpackb
from arena.transport.errors import ConnectionLost, MissingMetadata, ProtocolError, RemoteError, TransportError

from arena_vla_eval.codec import PROTOCOL_VERSION, ImageFormat, Message, encode_observation, envelope, parse_envelope

__all__ = ["RemoteError", "VlaEvalClient"]


def _harness_version() -> str:
    from arena import __version__

    return f"arena-{__version__}"


class VlaEvalClient(PolicyClient):
    """One connection to a vla-eval model server (``arena.transport.interface.WireClient``).

    Args:
        host, port: the server (``host`` may be a ``ws://`` URI).
        image_format: how the observation's ``images`` travel: ``png`` (default, lossless),
            ``jpeg`` or ``raw`` (:mod:`arena_vla_eval.codec`).
        benchmark: sent in HELLO (vla-eval's clients send their benchmark's name).
        **options: :class:`~arena.transport.PolicyClient`'s timeouts and keepalive.

    Not for use from several threads at once (one env's requests are sequential).
    """

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        image_format: ImageFormat = "png",
        benchmark: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(host, port, **options)
        self.image_format: ImageFormat = image_format
        self.benchmark = benchmark
        self._seq = 0
        self._episode: dict[str, Any] | None = None  # the open episode's EPISODE_START payload
        self.episodes_started = 0

    # -- handshake ----------------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _pack(self, kind: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        seq = self._next_seq()
        return seq, self._packer.pack(envelope(kind, payload, seq))

    def _read_metadata(self, conn: ClientConnection, deadline: float, budget: float) -> dict[str, Any]:
        """Send HELLO and read the server's HELLO: the connection's metadata.

        Raises:
            MissingMetadata: no HELLO reply within the connect budget.
            ProtocolError: the reply is not a HELLO, or speaks another protocol version.
            RemoteError: the server answered ERROR.
        """
        hello = {"harness_version": _harness_version(), "protocol_version": PROTOCOL_VERSION}
        if self.benchmark:
            hello["benchmark"] = self.benchmark
        seq, frame = self._pack("hello", hello)
        try:
            conn.send(frame)
            reply = conn.recv(timeout=max(deadline - time.monotonic(), 0.001))
        except TimeoutError as exc:
            raise MissingMetadata(
                f"{self.endpoint}: no HELLO reply within {budget:.3g} s of connecting (is this a vla-eval model server?)"
            ) from exc
        except ConnectionClosed as exc:
            raise self._closed_error(exc, before="the HELLO reply") from exc
        if isinstance(reply, str):
            raise ProtocolError(f"{self.endpoint}: text frame {reply[:200]!r} instead of the HELLO reply")
        message = self._decode(reply)
        if message.type == "error":
            raise RemoteError(f"{self.endpoint}: the server answered HELLO with ERROR: {message.payload!r:.300}")
        if message.type != "hello" or not isinstance(message.payload, dict):
            raise ProtocolError(f"{self.endpoint}: expected a HELLO reply, got {message.type}")
        version = message.payload.get("protocol_version")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(
                f"{self.endpoint}: the server speaks vla-eval protocol version {version!r}; this client speaks {PROTOCOL_VERSION}"
            )
        return dict(message.payload)

    def _decode(self, frame: bytes) -> Message:
        try:
            return parse_envelope(unpackb(frame))
        except TransportError as exc:
            if isinstance(exc, ProtocolError):
                raise ProtocolError(f"{self.endpoint}: {exc}") from exc
            raise ProtocolError(f"{self.endpoint}: undecodable message: {exc}") from exc

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Open the websocket, exchange HELLO, and re-open the env's episode if one is open.

        Returns the server's HELLO payload (:attr:`metadata`). Raises what
        :meth:`PolicyClient.connect` raises, and :class:`RemoteError` / ``ProtocolError`` for
        a HELLO the server refused or answered wrongly.
        """
        metadata = super().connect(timeout_s)
        if self._episode is not None:  # a reconnect mid-episode: the new session must know it
            self._send_only("episode_start", self._episode)
        return metadata

    # -- episodes -----------------------------------------------------------------------------
    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Send EPISODE_START ``{"task": info["task"]}`` (and ``mode`` when ``info`` has one:
        ``"live"``, as vla-eval's live runner sends it) (the server drops the
        session's chunk buffer and per-episode state). Not connected: it is sent on the next
        :meth:`connect`. A send that fails drops the connection; the next request reconnects
        (and sends it then)."""
        self._episode = {"task": dict(info.get("task") or {})}
        if info.get("mode"):
            self._episode["mode"] = str(info["mode"])
        self.episodes_started += 1
        if self.connected:
            try:
                self._send_only("episode_start", self._episode)
            except ConnectionLost:
                pass

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Send EPISODE_END with ``info`` (the episode's result) if an episode is open; best
        effort (a lost connection has ended the server-side session anyway)."""
        if self._episode is None:
            return
        self._episode = None
        if self.connected:
            try:
                self._send_only("episode_end", dict(info))
            except ConnectionLost:
                pass

    @property
    def in_episode(self) -> bool:
        """Whether an episode was started and not ended."""
        return self._episode is not None

    def _send_only(self, kind: str, payload: dict[str, Any]) -> None:
        """Send a message the server does not answer.

        Raises:
            ConnectionLost: not connected, or the send failed (the connection is dropped).
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                raise ConnectionLost(f"{self.endpoint}: not connected")
            _, frame = self._pack(kind, payload)
            try:
                conn.send(frame)
            except (ConnectionClosed, OSError) as exc:
                self._discard()
                raise ConnectionLost(f"{self.endpoint}: sending {kind.upper()} failed: {exc}") from exc

    # -- inference ----------------------------------------------------------------------------
    def infer(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one OBSERVATION and return the ACTION payload (``{"actions": ndarray, ...}``).

        Raises:
            RemoteError: the server answered ERROR (its message is in the text); the connection
                stays open when the error answers this observation, and is dropped when it
                answers an earlier message (an EPISODE_START the model refused), since this
                observation's own answer would follow out of step.
            ProtocolError: an ACTION for another ``seq``, another message type, or a payload
                that is not a map (the connection is dropped).
            CodecError: ``request`` holds a value that cannot travel (nothing was sent).
            and :meth:`PolicyClient.request`'s transport errors (timeouts, lost connections).
        """
        payload = encode_observation(request, self.image_format)
        seq = self._seq + 1  # _pack inside request() would be too late to know it: reserve it
        self._seq = seq
        raw = self.request(envelope("observation", payload, seq))
        try:
            message = parse_envelope(raw)
        except TransportError as exc:
            self._discard()
            raise ProtocolError(f"{self.endpoint}: reply to observation seq {seq}: {exc}") from exc
        if message.type == "error":
            text = message.payload.get("error") if isinstance(message.payload, dict) else message.payload
            if message.seq != seq:
                self._discard()
                raise RemoteError(f"{self.endpoint}: ERROR for message seq {message.seq} (before observation seq {seq}): {text}")
            raise RemoteError(f"{self.endpoint}: the model server failed on observation seq {seq}: {text}")
        if message.type != "action" or message.seq != seq or not isinstance(message.payload, dict):
            self._discard()
            got = f"{message.type} seq {message.seq}"
            raise ProtocolError(f"{self.endpoint}: observation seq {seq} was answered by {got}; the connection is out of step")
        return message.payload
