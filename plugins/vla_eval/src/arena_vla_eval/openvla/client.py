"""HTTP client of OpenVLA's and OpenVLA-OFT's deploy servers (``POST /act``, json_numpy).

Contract (``reference/live-and-protocols.md`` C, "OpenVLA and OpenVLA-OFT deploy servers";
openvla ``vla-scripts/deploy.py`` @ c8f03f4 lines 91-121, openvla-oft ``vla-scripts/deploy.py``
@ 213c5ff lines 78-107):

* request: ``POST /act`` with a JSON body in which every ndarray is json_numpy's map
  ``{"__numpy__": base64 of the C-order bytes, "dtype": numpy descr, "shape": [...]}``; or,
  for clients without json_numpy on the server's side, the **encoded** variant
  ``{"encoded": "<the json_numpy JSON text of the body>"}`` (then the reply is encoded once
  more: a JSON string holding json_numpy text);
* reply: OpenVLA one action, an ndarray ``(7,)``; OFT a **list** of ndarrays, the action
  chunk (LIBERO 8 x 7, ALOHA 25 x 14);
* any failure on the server: HTTP **200** with the JSON string ``"error"`` (the traceback goes
  to the server's log) -- :class:`RemoteError` here, never an action.

Connections: one request per HTTP connection (``Connection: close``), so an idle keep-alive
socket the server dropped between two chunks is never mistaken for a dead server. There is
no handshake: :meth:`OpenVLAHttpClient.connect` waits until the port accepts a TCP connection.
Decoding accepts only bool/int/uint/float arrays (json_numpy's own hook would build any dtype
the server names).
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from base64 import b64decode
from typing import Any

import json_numpy
import numpy as np
from numpy.lib.format import descr_to_dtype

from arena.transport.errors import ConnectionLost, ProtocolError, RemoteError, RequestTimeout, ServerUnavailable

__all__ = ["ERROR_BODY", "OpenVLAHttpClient", "RemoteError", "decode_json_numpy", "encode_body"]

#: What both deploy servers answer (HTTP 200) when anything goes wrong.
ERROR_BODY = "error"
_ALLOWED_KINDS = frozenset("biuf")
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.1, 2.0


def _strict_hook(obj: dict[str, Any]) -> Any:
    if "__numpy__" not in obj:
        return obj
    try:
        dtype = descr_to_dtype(obj["dtype"])
        shape = [int(s) for s in obj["shape"]]
        data = b64decode(obj["__numpy__"], validate=True)
    except Exception as exc:  # malformed descr, shape or base64
        raise ProtocolError(f"malformed json_numpy array: {exc!r}") from None
    if dtype.kind not in _ALLOWED_KINDS:
        raise ProtocolError(f"json_numpy array of dtype {dtype} refused (bool/int/uint/float only)")
    count = int(np.prod(shape)) if shape else 1
    if len(data) != count * dtype.itemsize:
        raise ProtocolError(f"json_numpy array holds {len(data)} bytes; shape {shape} of {dtype} needs {count * dtype.itemsize}")
    array = np.frombuffer(data, dtype=dtype).copy()
    return array.reshape(shape) if shape else array[0]


def decode_json_numpy(text: str | bytes) -> Any:
    """JSON text -> Python values with json_numpy arrays decoded (writable copies).

    Raises:
        ProtocolError: not JSON, or a malformed or refused array.
    """
    try:
        return json.loads(text, object_hook=_strict_hook)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"reply is not JSON: {exc}") from None


def encode_body(request: dict[str, Any], *, encoded: bool = False) -> bytes:
    """The POST body for ``request`` (json_numpy arrays; the ``encoded`` variant when asked)."""
    text = json_numpy.dumps(request)
    return json.dumps({"encoded": text}).encode() if encoded else text.encode()


class OpenVLAHttpClient:
    """One env's client of a deploy server (``arena.transport.interface.WireClient``).

    Args:
        host, port: the server (``host`` may be ``http://HOST``).
        encoded: use the double-encoded variant (``{"encoded": ...}``).
        connect_timeout_s: how long :meth:`connect` waits for the port to accept connections.
        request_timeout_s: seconds per request once the server has answered one.
        first_request_timeout_s: seconds for the first request after the server (re)started.
        Other keyword arguments (the websocket clients' keepalive and API key) are accepted
        and ignored: the deploy servers have neither.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        encoded: bool = False,
        path: str = "/act",
        connect_timeout_s: float = 60.0,
        request_timeout_s: float = 60.0,
        first_request_timeout_s: float | None = None,
        **_ignored: Any,
    ) -> None:
        self.host = host.removeprefix("http://").rstrip("/")
        self.port = port
        self.path = path
        self.encoded = encoded
        self.endpoint = f"http://{self.host}:{port}{path}"
        self.connect_timeout_s = connect_timeout_s
        self.request_timeout_s = request_timeout_s
        self.first_request_timeout_s = first_request_timeout_s
        self.metadata: dict[str, Any] | None = None
        self.saw_server_down = False
        self.server_warm = False
        self._connected = False

    @property
    def connected(self) -> bool:
        return self._connected

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Wait until the server's port accepts a TCP connection (back-off 0.1 s doubling to
        2 s); returns the metadata ``{"protocol", "endpoint", "encoded"}``.

        Raises:
            ServerUnavailable: nothing accepted a connection within the time.
        """
        budget = self.connect_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + budget
        delay = _BACKOFF_START_S
        self.saw_server_down = False
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=max(0.05, min(5.0, deadline - time.monotonic()))).close()
                break
            except OSError as exc:
                self.saw_server_down = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ServerUnavailable(
                        f"{self.endpoint}: no server accepted the connection within {budget:.3g} s (last error: {exc})"
                    ) from exc
                time.sleep(min(delay, remaining))
                delay = min(2 * delay, _BACKOFF_MAX_S)
        if self.saw_server_down:
            self.server_warm = False
        self._connected = True
        self.metadata = {"protocol": "openvla-deploy-http", "endpoint": self.endpoint, "encoded": self.encoded}
        return self.metadata

    def expect_warmup(self) -> None:
        """Give the next request ``first_request_timeout_s`` (the server restarted)."""
        self.server_warm = False

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: the deploy servers keep no per-episode state."""

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        """Nothing: the deploy servers keep no per-episode state."""

    def close(self) -> None:
        self._connected = False

    def infer(self, request: dict[str, Any]) -> dict[str, Any]:
        """POST ``request`` to ``/act``; returns ``{"actions": float (H, A)}`` (``H`` = 1 for
        OpenVLA's single action).

        Raises:
            RemoteError: the server answered ``"error"``.
            ProtocolError: another HTTP status, a body that is not JSON, or a reply that is
                neither an array nor a list of equal-length arrays.
            RequestTimeout: no reply in time.
            ConnectionLost: the connection was refused or dropped (reconnect).
        """
        if not self._connected:
            raise ConnectionLost(f"{self.endpoint}: not connected")
        body = encode_body(request, encoded=self.encoded)
        first = not self.server_warm and self.first_request_timeout_s is not None
        timeout = self.first_request_timeout_s if first else self.request_timeout_s
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request("POST", self.path, body=body, headers={"Content-Type": "application/json", "Connection": "close"})
            response = conn.getresponse()
            status, text = response.status, response.read()
        except (TimeoutError, socket.timeout) as exc:
            self._connected = False
            raise RequestTimeout(f"{self.endpoint}: no reply within {timeout:.3g} s") from exc
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            self._connected = False
            self.server_warm = False
            raise ConnectionLost(f"{self.endpoint}: {type(exc).__name__}: {exc}; reconnect") from exc
        finally:
            conn.close()
        if status != 200:
            shown = text[:300].decode("utf-8", "replace")
            raise ProtocolError(f"{self.endpoint}: HTTP {status}: {shown}")
        reply = decode_json_numpy(text)
        if self.encoded and isinstance(reply, str) and reply != ERROR_BODY:
            reply = decode_json_numpy(reply)
        if isinstance(reply, str) and reply == ERROR_BODY:
            raise RemoteError(
                f"{self.endpoint}: the deploy server answered \"error\" (HTTP 200): it failed on this request; "
                "its traceback is in the server's log"
            )
        self.server_warm = True
        return {"actions": self._chunk(reply)}

    def _chunk(self, reply: Any) -> np.ndarray:
        if isinstance(reply, np.ndarray) and reply.ndim == 1:
            return reply.reshape(1, -1)
        if isinstance(reply, np.ndarray) and reply.ndim == 2:
            return reply
        if isinstance(reply, list) and reply and all(isinstance(a, np.ndarray) and a.ndim == 1 for a in reply):
            if len({a.shape for a in reply}) == 1:
                return np.stack(reply)
        kind = type(reply).__name__
        raise ProtocolError(f"{self.endpoint}: reply is {kind} {str(reply)[:120]!r}; expected an action array or a list of them")
