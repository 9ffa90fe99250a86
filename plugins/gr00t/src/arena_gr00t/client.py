"""Synchronous ZeroMQ REQ client of a GR00T policy server (N1.5 and N1.6 generations).

Protocol (``reference/protocols.md`` sections 5.2-5.5): a single-part msgpack message
``{"endpoint": NAME, "data": {...}, "api_token": TOKEN}`` (``data`` only for endpoints that
take input, ``api_token`` only when set) and exactly one reply. A server exception comes back
as ``{"error": str}`` and the REP socket stays usable; the N1.6 client also treats a raw
``b"ERROR"`` reply as an error.

Unlike GR00T's own client, timeouts really apply (``RCVTIMEO``/``SNDTIMEO``): after one, the
REQ socket is stuck waiting for the lost reply (``EFSM`` on the next send), so it is closed
with ``LINGER=0`` and recreated; closing never blocks on an undelivered request.

A ZeroMQ REQ socket never reports that its server died: a request to a dead server simply
waits. So while it waits for a reply the client checks every ``_LIVENESS_INTERVAL_S`` that
something still accepts TCP connections on the port; a refused connection means the server
process is gone, and the request fails at once (:class:`ConnectionLost`) instead of after
its timeout. :meth:`Gr00tClient.connect` (waiting for ``ping`` answers) then tells a
restarted server (it refused connections meanwhile) from one that stayed up: only the
former gets ``first_request_timeout_s`` again.

It is a :class:`arena.transport.interface.WireClient` (``infer`` is ``get_action`` in the
client's ``generation``), so the policy's retries run on arena's
:class:`~arena.policies.connection.ConnectionLoop`.

    client = Gr00tClient("127.0.0.1", 5555)
    client.connect(60)
    modality = client.get_modality_config()
    action, info = client.get_action(observation, generation="n1.6")
"""

from __future__ import annotations

import socket
import time
from typing import Any, Literal

import zmq

from arena.transport.errors import (
    CodecError,
    ConnectionLost,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ServerError,
    ServerUnavailable,
)

from arena_gr00t.codec import ModalityConfig, packb, unpackb

__all__ = ["Generation", "Gr00tClient", "Gr00tServerError"]

Generation = Literal["n1.6", "n1.5", "n1.6-sim"]
#: Seconds between the checks that the server still listens while a reply is awaited.
_LIVENESS_INTERVAL_S = 2.0


class Gr00tServerError(ServerError, RemoteError):
    """The server answered ``{"error": ...}`` (or ``b"ERROR"``). The socket stays usable."""


class Gr00tClient:
    """One REQ socket to a GR00T server; not for use from several threads at once.

    Args:
        host, port: the server (``tcp://host:port``).
        api_token: sent as ``api_token`` in every request when set.
        request_timeout_s: seconds to wait for each reply.
        first_request_timeout_s: seconds for the first ``get_action`` after the server
            started: the first one this client sends, and the first after
            :meth:`connect` found the server restarted (it warms up again);
            ``None`` uses ``request_timeout_s``.
        connect_timeout_s: seconds :meth:`connect` waits for a ``ping`` answer by default.
        generation: the wire generation :meth:`infer` speaks (see :meth:`get_action`).
        max_message_bytes: largest reply accepted (ZeroMQ ``MAXMSGSIZE``: a bigger one drops
            the connection, which surfaces as a :class:`RequestTimeout`); what a reply may
            build when decoded is bounded by its size (:func:`arena_gr00t.codec.unpackb`).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        api_token: str | None = None,
        connect_timeout_s: float = 60.0,
        request_timeout_s: float = 60.0,
        first_request_timeout_s: float | None = None,
        max_message_bytes: int = 64 * 2**20,
        generation: Generation = "n1.6",
    ) -> None:
        self.host, self.port = host, port
        self.endpoint = f"tcp://{host}:{port}"
        self.max_message_bytes = max_message_bytes
        self.api_token = api_token
        self.generation: Generation = generation
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_request_timeout_s = first_request_timeout_s
        self.recreated_sockets = 0
        self._context = zmq.Context.instance()
        self._socket: zmq.Socket | None = None
        self.server_warm = False
        self.saw_server_down = False
        self.metadata: dict[str, Any] | None = None
        self._connected = False
        self._was_connected = False

    # ---- socket ---------------------------------------------------------------------------
    def _sock(self) -> zmq.Socket:
        if self._socket is None:
            sock = self._context.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
            sock.connect(self.endpoint)
            self._socket = sock
        return self._socket

    def _recreate(self) -> None:
        """Drop the (stuck) REQ socket; the next call opens a fresh one."""
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close(linger=0)
            self.recreated_sockets += 1

    def close(self) -> None:
        """Close the socket without waiting for undelivered requests; idempotent."""
        self._connected = False
        sock, self._socket = self._socket, None
        if sock is not None:
            sock.close(linger=0)

    # ---- requests -------------------------------------------------------------------------
    def call(self, endpoint: str, data: dict[str, Any] | None = None, *, timeout_s: float | None = None) -> Any:
        """Send one request to ``endpoint`` and return the decoded reply.

        Raises:
            CodecError: ``data`` cannot be encoded (nothing was sent).
            RequestTimeout: no reply within ``timeout_s`` (default ``request_timeout_s``);
                the socket was recreated.
            ConnectionLost: a ZeroMQ error, or the server stopped listening while the reply
                was awaited; the socket was recreated.
            Gr00tServerError: the server answered ``{"error": ...}`` or ``b"ERROR"``.
            ProtocolError: the reply is not decodable.
        """
        message: dict[str, Any] = {"endpoint": endpoint}
        if data is not None:
            message["data"] = data
        if self.api_token is not None:
            message["api_token"] = self.api_token
        payload = packb(message)
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        timeout_ms = max(1, int(timeout * 1000))
        sock = self._sock()
        try:
            sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
            sock.send(payload)
            raw = self._receive(sock, endpoint, timeout)
        except zmq.Again as exc:
            self._recreate()
            raise RequestTimeout(
                f"{self.endpoint}: no reply to '{endpoint}' within {timeout:.3g} s; socket recreated"
            ) from exc
        except zmq.ZMQError as exc:
            self._recreate()
            raise ConnectionLost(f"{self.endpoint}: ZeroMQ error on '{endpoint}': {exc}") from exc
        if raw == b"ERROR":
            raise Gr00tServerError(f"{self.endpoint}: server answered ERROR to '{endpoint}'")
        try:
            reply = unpackb(raw)
        except CodecError as exc:
            raise ProtocolError(f"{self.endpoint}: undecodable reply to '{endpoint}': {exc}") from exc
        if isinstance(reply, dict) and "error" in reply:
            raise Gr00tServerError(f"{self.endpoint}: server error on '{endpoint}': {reply['error']}", str(reply["error"]))
        return reply

    def _receive(self, sock: zmq.Socket, endpoint: str, timeout_s: float) -> bytes:
        """The reply, awaited in slices between which the server's port is checked.

        Raises:
            zmq.Again: no reply within ``timeout_s``.
            ConnectionLost: the port refused a TCP connection (the server process is gone).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            slice_s = min(remaining, _LIVENESS_INTERVAL_S)
            sock.setsockopt(zmq.RCVTIMEO, max(1, int(slice_s * 1000)))
            try:
                return sock.recv()
            except zmq.Again:
                if deadline - time.monotonic() <= 0:
                    raise
            if not self._listening():
                self._recreate()
                self.server_warm = False  # its process is gone: a successor warms up again
                raise ConnectionLost(
                    f"{self.endpoint}: the server stopped listening while '{endpoint}' awaited its reply "
                    "(connection refused); socket recreated"
                )

    def _listening(self) -> bool:
        """False only when the port refuses a TCP connection (nothing listens there); a slow or
        unreachable host counts as listening (it may be a network hiccup)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0):
                return True
        except ConnectionRefusedError:
            return False
        except OSError:
            return True

    # ---- the WireClient interface -----------------------------------------------------------
    @property
    def connected(self) -> bool:
        """True from a successful :meth:`connect` until :meth:`close`. A ZeroMQ socket has no
        connection to lose: after a fault the next request opens a fresh socket by itself."""
        return self._connected

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Wait until the server answers ``ping`` (``timeout_s``, default
        ``connect_timeout_s``); returns (and stores as :attr:`metadata`) its answer.

        :attr:`saw_server_down` tells whether its port refused connections meanwhile: a
        server that (re)started, whose next ``get_action`` waits ``first_request_timeout_s``
        for the warm-up; one that stayed up gets ``request_timeout_s``.

        Raises:
            ServerUnavailable: no answer within the time ("no answer to ping" the first
                time, "did not answer again" after a fault).
            Gr00tServerError: the server answered with an error (e.g. a wrong api_token).
        """
        budget = self.connect_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + budget
        restarted = False
        last = "no attempt"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                said = "did not answer again" if self._was_connected else "no answer to ping"
                raise ServerUnavailable(f"{self.endpoint}: the server {said} within {budget:g} s ({last})")
            if not self._listening():
                restarted = True
                last = "connection refused"
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
                continue
            try:
                reply = self.call("ping", timeout_s=min(5.0, remaining))
            except (RequestTimeout, ConnectionLost) as exc:
                last = str(exc)
                continue
            break
        self.saw_server_down = restarted
        if restarted:
            self.server_warm = False
        self.metadata = reply if isinstance(reply, dict) else {}
        self._connected = self._was_connected = True
        return self.metadata

    def infer(self, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`get_action` in this client's ``generation``: ``(action_dict, info)``."""
        return self.get_action(request, generation=self.generation)

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: a GR00T server keeps no per-env episode (its ``reset`` is for all clients)."""

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: GR00T's protocol has no episode boundary."""

    def expect_warmup(self) -> None:
        """Give the next ``get_action`` ``first_request_timeout_s`` (the server restarted)."""
        self.server_warm = False

    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when the server answers ``ping`` within ``timeout_s`` (a dead server: False)."""
        try:
            self.call("ping", timeout_s=timeout_s)
        except (RequestTimeout, ConnectionLost, Gr00tServerError, ProtocolError):
            return False
        return True

    def get_modality_config(self) -> dict[str, ModalityConfig]:
        """The model's ``{"video", "state", "action", "language"}`` ModalityConfigs; ``{}`` if none.

        Raises:
            ProtocolError: the reply is not a map of ModalityConfigs.
        """
        reply = self.call("get_modality_config")
        if not isinstance(reply, dict) or not all(isinstance(v, ModalityConfig) for v in reply.values()):
            raise ProtocolError(f"{self.endpoint}: get_modality_config reply is not a map of ModalityConfigs: {reply!r:.200}")
        return reply

    def get_action(
        self, observation: dict[str, Any], *, generation: Generation = "n1.6", options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Request actions for ``observation``; returns ``(action_dict, info)``.

        N1.6 (and N1.6 behind ``--use-sim-policy-wrapper``, ``"n1.6-sim"``, whose observation
        is flat) sends ``data={"observation": ..., "options": ...}`` and gets ``[action,
        info]``; N1.5 sends the observation itself as ``data`` and gets the action dict
        (``info`` is ``{}``). Either reply shape is accepted whatever the generation.

        Raises:
            ProtocolError: the reply is neither an action map nor ``[action, info]``.
            and everything :meth:`call` raises.
        """
        data = observation if generation == "n1.5" else {"observation": observation, "options": options}
        timeout = self.request_timeout_s
        if not self.server_warm and self.first_request_timeout_s is not None:
            timeout = self.first_request_timeout_s
        reply = self.call("get_action", data, timeout_s=timeout)
        self.server_warm = True
        if isinstance(reply, (list, tuple)) and len(reply) == 2 and isinstance(reply[0], dict):
            info = reply[1] if isinstance(reply[1], dict) else {}
            return reply[0], info
        if isinstance(reply, dict):
            return reply, {}
        raise ProtocolError(
            f"{self.endpoint}: get_action reply is a {type(reply).__name__}; expected an action map "
            f"(N1.5) or [action, info] (N1.6)"
        )

    def reset(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """N1.6 ``reset`` endpoint (resets the server policy's state for every client)."""
        reply = self.call("reset", {"options": options})
        return reply if isinstance(reply, dict) else {}
