"""Readiness probes: every kind against a live and a dead port; early abort."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Iterator

import msgpack
import pytest
from transport_fakes import EchoModel, free_port

from arena.errors import ConfigError
from arena.transport import NotReady, PolicyServer, ReadinessTimeout, Unauthorized, probe_once, wait_until_ready

Start = Callable[..., PolicyServer]


@pytest.fixture
def live(start_server: Start) -> PolicyServer:
    return start_server(EchoModel())


@pytest.mark.parametrize("kind", ["websocket", "tcp", "http:/healthz", "http:/readyz"])
def test_probe_passes_against_a_live_server(live: PolicyServer, kind: str) -> None:
    deadline = time.monotonic() + 5
    while not live.ready:  # /readyz and websocket need load() to have finished
        assert time.monotonic() < deadline
        time.sleep(0.01)
    probe_once(kind, "127.0.0.1", live.port, 2.0)
    wait_until_ready(kind, "127.0.0.1", live.port, 2.0)


@pytest.mark.parametrize("kind", ["websocket", "tcp", "http:/healthz"])
def test_probe_fails_against_a_dead_port(kind: str) -> None:
    port = free_port()
    with pytest.raises(NotReady, match=f"127.0.0.1:{port}"):
        probe_once(kind, "127.0.0.1", port, 0.3)


def test_readyz_probe_waits_for_model_load(start_server: Start) -> None:
    gate = threading.Event()
    server = start_server(EchoModel(load_gate=gate))
    with pytest.raises(NotReady, match="503"):
        probe_once("http:/readyz", "127.0.0.1", server.port, 1.0)
    with pytest.raises(NotReady):
        probe_once("websocket", "127.0.0.1", server.port, 0.3)  # no metadata before load
    threading.Timer(0.3, gate.set).start()
    wait_until_ready("http:/readyz", "127.0.0.1", server.port, 5.0, interval_s=0.05)
    assert server.ready


def test_websocket_probe_passes_the_api_key(start_server: Start) -> None:
    server = start_server(EchoModel(), api_key="k")
    with pytest.raises(Unauthorized, match="401"):
        probe_once("websocket", "127.0.0.1", server.port, 2.0)
    wait_until_ready("websocket", "127.0.0.1", server.port, 5.0, api_key="k")


@pytest.mark.parametrize("key", [None, "wrong"])
def test_a_refused_key_fails_the_wait_at_once_naming_401(start_server: Start, key: str | None) -> None:
    server = start_server(EchoModel(), api_key="k")
    # Unauthorized, not ReadinessTimeout: the wait stops at the first answer instead of
    # retrying for the 600 s a model server may take to load.
    with pytest.raises(Unauthorized, match="HTTP 401") as info:
        wait_until_ready("websocket", "127.0.0.1", server.port, 600.0, api_key=key)
    assert ("with a key" if key else "without one") in str(info.value)


def test_an_http_probe_refused_with_401_says_so() -> None:
    import http.server

    class Keyed(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            ok = self.headers.get("Authorization") == "Api-Key k"
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(b"OK\n" if ok else b"no\n")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Keyed)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(Unauthorized, match="answered HTTP 401"):
            wait_until_ready("http:/healthz", "127.0.0.1", httpd.server_address[1], 600.0)
        wait_until_ready("http:/healthz", "127.0.0.1", httpd.server_address[1], 5.0, api_key="k")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_timeout_message_names_kind_endpoint_seconds_and_last_error() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ReadinessTimeout) as info:
        wait_until_ready("tcp", "127.0.0.1", port, 0.5, interval_s=0.1)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 1.5
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "tcp" in message
    assert "after 0.5 s" in message or "after 0.6 s" in message
    assert "ConnectionRefusedError" in message


def test_should_abort_stops_the_wait_early() -> None:
    port = free_port()
    calls = []

    def should_abort() -> str | None:
        calls.append(1)
        return "server process exited with code 1" if len(calls) >= 3 else None

    started = time.monotonic()
    with pytest.raises(ReadinessTimeout, match="server process exited with code 1"):
        wait_until_ready(
            "http:/readyz", "127.0.0.1", port, 30.0, interval_s=0.05, should_abort=should_abort
        )
    assert time.monotonic() - started < 2.0


def test_unknown_kind_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown readiness probe kind 'grpc'"):
        probe_once("grpc", "127.0.0.1", 1, 0.1)


@pytest.fixture
def zmq_ping_server() -> Iterator[int]:
    zmq = pytest.importorskip("zmq")
    context = zmq.Context()
    sock = context.socket(zmq.REP)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    sock.setsockopt(zmq.RCVTIMEO, 100)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                request: Any = msgpack.unpackb(sock.recv())
            except zmq.Again:
                continue
            if request.get("endpoint") == "ping":
                reply = {"status": "ok", "message": "Server is running"}
            else:
                reply = {"error": "Unknown endpoint"}
            sock.send(msgpack.packb(reply))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join(2)
    sock.close(linger=0)
    context.term()


def test_zmq_ping_probe_against_live_and_dead_ports(zmq_ping_server: int) -> None:
    probe_once("zmq-ping", "127.0.0.1", zmq_ping_server, 2.0)
    dead = free_port()
    started = time.monotonic()
    with pytest.raises(NotReady, match="no reply to a zmq ping within 0.3 s"):
        probe_once("zmq-ping", "127.0.0.1", dead, 0.3)
    with pytest.raises(ReadinessTimeout, match="zmq-ping"):
        wait_until_ready("zmq-ping", "127.0.0.1", dead, 0.6, interval_s=0.05)
    assert time.monotonic() - started < 2.5  # never blocks on a dead REQ socket


def test_zmq_ping_without_pyzmq_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zmq", None)
    with pytest.raises(ConfigError, match="pip install pyzmq"):
        probe_once("zmq-ping", "127.0.0.1", 1, 0.1)
