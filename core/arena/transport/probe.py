"""Readiness probes for launch backends and ``arena probe KIND HOST PORT --timeout S``.

Kinds:

* ``websocket``: connect and read the metadata frame (arena's server sends it only after the
  model has loaded, so this is the strongest check for openpi-style servers);
* ``tcp``: a TCP connection is accepted;
* ``http:<path>``: ``GET <path>`` answers 200 (e.g. ``http:/readyz``, ``http:/healthz``);
* ``zmq-ping``: a ZeroMQ REQ ``{"endpoint": "ping"}`` gets a reply without ``"error"``
  (GR00T servers; needs pyzmq).

With an API key every probe presents it as the clients do (``Authorization: Api-Key KEY`` on
the websocket handshake and on HTTP GETs, ``api_token`` in GR00T requests). A server that
refuses the key (HTTP 401/403, GR00T ``Unauthorized``) raises
:class:`~arena.transport.errors.Unauthorized` at once: waiting longer cannot make it ready.
"""

from __future__ import annotations

import http.client
import socket
import time
from typing import Any, Callable

from arena.errors import ConfigError
from arena.transport.client import PolicyClient
from arena.transport.errors import NotReady, ReadinessTimeout, TransportError, Unauthorized

__all__ = ["KINDS", "probe_once", "wait_until_ready"]

KINDS = ("websocket", "tcp", "http:<path>", "zmq-ping")
# One attempt never takes longer than this, so should_abort is polled regularly.
_MAX_ATTEMPT_S = 5.0


def probe_once(
    kind: str, host: str, port: int, timeout_s: float, api_key: str | None = None
) -> None:
    """Check once whether the server is ready; return if it is.

    Raises:
        NotReady: it is not (the cause is chained and named in the message).
        Unauthorized: the server refused ``api_key`` (or its absence).
        ConfigError: unknown ``kind``.
    """
    endpoint = f"{host}:{port}"
    try:
        if kind == "websocket":
            _probe_websocket(host, port, timeout_s, api_key)
        elif kind == "tcp":
            with socket.create_connection((host, port), timeout=timeout_s):
                pass
        elif kind.startswith("http:"):
            path = kind[len("http:") :]
            path = path if path.startswith("/") else f"/{path}"
            _probe_http(host, port, path, timeout_s, api_key)
        elif kind == "zmq-ping":
            _probe_zmq(host, port, timeout_s, api_key)
        else:
            raise ConfigError(
                f"unknown readiness probe kind {kind!r}; expected one of {', '.join(KINDS)}"
            )
    except (ConfigError, NotReady, Unauthorized):
        raise
    except (TransportError, OSError, http.client.HTTPException) as exc:
        raise NotReady(f"{kind} probe of {endpoint}: {type(exc).__name__}: {exc}") from exc


def wait_until_ready(
    kind: str,
    host: str,
    port: int,
    timeout_s: float,
    *,
    api_key: str | None = None,
    interval_s: float = 0.2,
    should_abort: Callable[[], str | None] | None = None,
) -> None:
    """Probe every ``interval_s`` until ready or ``timeout_s`` seconds have passed.

    ``should_abort`` is called before each attempt; a non-``None`` string (e.g. "server process
    exited with code 1") stops the wait at once.

    Raises:
        ReadinessTimeout: not ready in time, or aborted; the message names the kind, the
            endpoint, the seconds waited and the last error seen.
        Unauthorized: the server refused the key (at the first answer, not after the timeout).
    """
    start = time.monotonic()
    deadline = start + timeout_s
    last_error: str = "no attempt made"
    while True:
        if should_abort is not None:
            reason = should_abort()
            if reason is not None:
                raise ReadinessTimeout(
                    f"gave up waiting for {kind} readiness of {host}:{port} after "
                    f"{time.monotonic() - start:.1f} s: {reason} (last error: {last_error})"
                )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReadinessTimeout(
                f"{host}:{port} not ready ({kind} probe) after {time.monotonic() - start:.1f} s "
                f"(timeout {timeout_s:g} s); last error: {last_error}"
            )
        try:
            probe_once(kind, host, port, min(remaining, _MAX_ATTEMPT_S), api_key)
            return
        except NotReady as exc:
            last_error = str(exc)
        time.sleep(max(0.0, min(interval_s, deadline - time.monotonic())))


def _probe_websocket(host: str, port: int, timeout_s: float, api_key: str | None) -> None:
    client = PolicyClient(
        host,
        port,
        api_key=api_key,
        connect_timeout_s=timeout_s,
        ping_interval_s=None,
        ping_timeout_s=None,
    )
    try:
        client.connect()
    finally:
        client.close()


def _probe_http(host: str, port: int, path: str, timeout_s: float, api_key: str | None) -> None:
    headers = {"Authorization": f"Api-Key {api_key}"} if api_key else {}
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        body = response.read(200)
    finally:
        conn.close()
    text = body.decode("utf-8", "replace").strip()
    if response.status in (401, 403):
        sent = "with an API key" if api_key else "without an API key"
        raise Unauthorized(
            f"GET http://{host}:{port}{path} answered HTTP {response.status} {text!r} "
            f"(missing or wrong API key; the probe asked {sent})"
        )
    if response.status != 200:
        raise NotReady(f"GET http://{host}:{port}{path} answered {response.status} {text!r}")


def _probe_zmq(host: str, port: int, timeout_s: float, api_key: str | None) -> None:
    try:
        import zmq
    except ImportError as exc:
        raise ConfigError(
            "the zmq-ping readiness probe needs pyzmq: pip install pyzmq"
        ) from exc
    import msgpack

    timeout_ms = max(1, int(timeout_s * 1000))
    # A fresh REQ socket per attempt: after a receive timeout a REQ socket is stuck (EFSM).
    sock: Any = zmq.Context.instance().socket(zmq.REQ)
    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
        sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
        sock.connect(f"tcp://{host}:{port}")
        try:
            request = {"endpoint": "ping"}
            if api_key:
                request["api_token"] = api_key  # GR00T checks its token on every endpoint
            sock.send(msgpack.packb(request))
            raw = sock.recv()
        except zmq.Again as exc:
            raise NotReady(f"no reply to a zmq ping within {timeout_s:g} s") from exc
    finally:
        sock.close(linger=0)
    try:
        reply = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - any garbage means not an answering GR00T server
        raise NotReady(f"zmq ping reply is not msgpack: {exc}") from exc
    if isinstance(reply, dict) and "error" in reply:
        error = str(reply["error"])
        if error.startswith("Unauthorized"):  # GR00T: "Unauthorized: Invalid API token"
            sent = "with an api_token" if api_key else "without an api_token"
            raise Unauthorized(f"tcp://{host}:{port}: zmq ping answered {error!r} (the probe asked {sent})")
        raise NotReady(f"zmq ping answered with an error: {error}")
