"""arena's client and server against each other and against the real openpi client."""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from websockets.asyncio.server import ServerConnection
from websockets.sync.client import connect as raw_connect
from transport_fakes import (
    BatchModel,
    EchoModel,
    FailingModel,
    GarbageTcpServer,
    RawServer,
    free_port,
    send_metadata,
)

from arena.transport import (
    CodecError,
    ConnectionLost,
    HandshakeError,
    KeepaliveTimeout,
    PolicyClient,
    PolicyServer,
    ProtocolError,
    RequestTimeout,
    ServerError,
    ServerUnavailable,
    TransportError,
    endpoint_uri,
    packb,
    unpackb,
    wait_until_ready,
)

Start = Callable[..., PolicyServer]
OBS = {"state": np.arange(3, dtype=np.float32), "prompt": "push the button"}


def _client(server: PolicyServer, **kw: Any) -> PolicyClient:
    kw.setdefault("connect_timeout_s", 5.0)
    kw.setdefault("request_timeout_s", 5.0)
    return PolicyClient("127.0.0.1", server.port, **kw)


def _http_get(port: int, path: str) -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        conn.close()


def test_client_gets_metadata_actions_and_server_timing(start_server: Start) -> None:
    server = start_server(EchoModel(metadata={"reset_pose": [0, -1.5]}))
    with _client(server) as client:
        assert client.metadata == {"reset_pose": [0, -1.5]}
        assert client.connected
        first = client.infer(OBS)
        np.testing.assert_array_equal(first["actions"], OBS["state"] * 2)
        assert first["actions"].dtype == np.float32
        assert set(first["server_timing"]) == {"infer_ms"}
        second = client.infer(OBS)
        timing = second["server_timing"]
        assert isinstance(timing["infer_ms"], float) and isinstance(timing["prev_total_ms"], float)
        assert timing["prev_total_ms"] >= first["server_timing"]["infer_ms"]
    assert not client.connected
    client.close()  # idempotent


def test_real_openpi_client_talks_to_arena_server(start_server: Start) -> None:
    pytest.importorskip("typing_extensions")
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    server = start_server(EchoModel(metadata={"reset_pose": [0.0, 1.0]}))
    with warnings.catch_warnings():
        # websockets >= 17.1 warns when openpi's client calls connect() outside a with-block.
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = WebsocketClientPolicy("127.0.0.1", server.port)
        assert policy.get_server_metadata() == {"reset_pose": [0.0, 1.0]}
        reply = policy.infer({"state": np.ones(4), "prompt": "x"})
        policy.infer({"state": np.ones(4), "prompt": "x"})
    np.testing.assert_array_equal(reply["actions"], np.full(4, 2.0))
    assert "infer_ms" in reply["server_timing"]


def test_model_error_arrives_as_server_error_with_traceback_and_server_keeps_serving(
    start_server: Start,
) -> None:
    server = start_server(FailingModel())
    client = _client(server)
    client.connect()
    with pytest.raises(ServerError) as info:
        client.infer({**OBS, "fail": True})
    assert "RuntimeError: model exploded on purpose" in info.value.traceback
    assert "Traceback (most recent call last)" in str(info.value)
    assert server.endpoint.replace("ws://", "") in str(info.value)
    assert not client.connected
    with pytest.raises(ConnectionLost, match="not connected"):
        client.infer(OBS)
    client.connect()
    assert "actions" in client.infer(OBS)
    client.close()


def test_error_frame_then_close_1011_on_the_wire(start_server: Start) -> None:
    server = start_server(FailingModel())
    with raw_connect(f"ws://127.0.0.1:{server.port}", compression=None, proxy=None) as ws:
        ws.recv(timeout=5)
        ws.send("a text frame is not a request")
        text = ws.recv(timeout=5)
        assert isinstance(text, str) and "requests must be binary msgpack frames" in text
        with pytest.raises(Exception):
            ws.recv(timeout=5)
        assert ws.close_code == 1011
        assert ws.close_reason == "Internal server error. Traceback included in previous frame."


def test_healthz_and_readyz_follow_model_loading(start_server: Start) -> None:
    gate = threading.Event()
    server = start_server(EchoModel(load_gate=gate))
    assert _http_get(server.port, "/healthz") == (200, "text/plain; charset=utf-8", "OK\n")
    status, _, _ = _http_get(server.port, "/readyz")
    assert status == 503 and not server.ready
    assert _http_get(server.port, "/")[0] == 426
    gate.set()
    deadline = time.monotonic() + 5
    while _http_get(server.port, "/readyz")[0] != 200:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert server.ready


def test_metadata_waits_for_load_to_finish(start_server: Start) -> None:
    gate = threading.Event()
    server = start_server(EchoModel(load_gate=gate))
    threading.Timer(0.3, gate.set).start()
    client = _client(server)
    started = time.monotonic()
    assert client.connect() == {"reset_pose": [0.0, -1.5, 1.5]}
    assert time.monotonic() - started >= 0.25
    client.close()


def test_failed_load_sends_traceback_to_waiting_clients() -> None:
    class BrokenModel(EchoModel):
        def load(self) -> None:
            assert self.load_gate is not None
            self.load_gate.wait(10)
            raise OSError("weights not found")

    gate = threading.Event()
    server = PolicyServer(BrokenModel(load_gate=gate), port=0).start_in_thread()
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            _client(server).connect()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=connect)
    thread.start()
    deadline = time.monotonic() + 5
    while not server._handlers:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gate.set()
    thread.join(10)
    assert len(errors) == 1 and isinstance(errors[0], ServerError)
    assert "OSError: weights not found" in (errors[0].traceback or "")
    assert "weights not found" in (server.load_error or "") and not server.ready
    server.stop()


def test_api_key_is_required_checked_and_accepted(start_server: Start) -> None:
    server = start_server(EchoModel(), api_key="s3cret")
    with pytest.raises(HandshakeError, match="HTTP 401.*api_key"):
        _client(server).connect()
    with pytest.raises(HandshakeError, match="HTTP 401"):
        _client(server, api_key="wrong").connect()
    with _client(server, api_key="s3cret") as client:
        assert "actions" in client.infer(OBS)
    assert _http_get(server.port, "/healthz")[0] == 200  # health stays open


def test_dead_endpoint_raises_server_unavailable_within_connect_timeout() -> None:
    port = free_port()
    client = PolicyClient("127.0.0.1", port, connect_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(ServerUnavailable, match=f"ws://127.0.0.1:{port}.*0.5 s"):
        client.connect()
    assert 0.4 <= time.monotonic() - started < 2.5
    assert not client.connected


def test_connect_retries_until_a_late_server_binds() -> None:
    port = free_port()
    server = PolicyServer(EchoModel(), port=port)
    timer = threading.Timer(0.4, server.start_in_thread)
    timer.start()
    try:
        with PolicyClient("127.0.0.1", port, connect_timeout_s=10) as client:
            assert "actions" in client.infer(OBS)
    finally:
        timer.join()
        server.stop()


def test_non_http_answer_is_a_handshake_error() -> None:
    with GarbageTcpServer() as garbage:
        with pytest.raises(HandshakeError, match=f"ws://127.0.0.1:{garbage.port}"):
            PolicyClient("127.0.0.1", garbage.port, connect_timeout_s=2).connect()


def test_silent_listener_is_a_handshake_timeout() -> None:
    with socket.socket() as silent:  # the kernel accepts TCP; nobody ever answers HTTP
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(HandshakeError, match="handshake timed out after 0.3 s"):
            PolicyClient("127.0.0.1", port, connect_timeout_s=0.3).connect()
        assert time.monotonic() - started < 1.5


def test_slow_model_raises_request_timeout_and_drops_connection(start_server: Start) -> None:
    server = start_server(EchoModel(infer_sleep_s=1.0))
    client = _client(server, request_timeout_s=0.2, first_request_timeout_s=3.0)
    client.connect()
    assert "actions" in client.infer(OBS)  # first request gets the longer timeout
    started = time.monotonic()
    with pytest.raises(RequestTimeout, match="no reply within 0.2 s"):
        client.infer(OBS)
    assert time.monotonic() - started < 0.9
    assert not client.connected


def test_oversized_request_is_refused_with_close_1009(start_server: Start) -> None:
    server = start_server(EchoModel(), max_message_bytes=10_000)
    with _client(server) as client:
        with pytest.raises(ProtocolError, match=r"too big \(close 1009: .*exceeds limit of 10000 bytes"):
            client.infer({"state": np.zeros(20_000, np.uint8)})
        assert not client.connected
    with _client(server) as client:  # the server still serves
        assert "actions" in client.infer(OBS)


def test_oversized_reply_is_refused_by_the_client(start_server: Start) -> None:
    server = start_server(EchoModel())
    with _client(server, max_message_bytes=2_000) as client:
        with pytest.raises(ProtocolError, match="max_message_bytes=2000"):
            client.infer({"state": np.zeros(5_000, np.uint8)})


def test_codec_refusal_happens_before_sending(start_server: Start) -> None:
    model = EchoModel()
    server = start_server(model)
    with _client(server) as client:
        with pytest.raises(CodecError, match="^observation/image: complex128 is not supported"):
            client.infer({"observation/image": np.zeros(2, np.complex128)})
        assert client.connected and model.calls == 0
        assert "actions" in client.infer(OBS)


def test_non_dict_reply_is_returned_by_request_and_refused_by_infer(start_server: Start) -> None:
    class ArrayModel(EchoModel):
        def infer(self, obs: dict[str, Any]) -> Any:
            return np.zeros((24, 8), np.float32)

    server = start_server(ArrayModel())
    with _client(server) as client:
        assert client.request(OBS).shape == (24, 8)
        with pytest.raises(ProtocolError, match="expected a map reply, got ndarray"):
            client.infer(OBS)


def test_server_shutdown_surfaces_as_connection_lost() -> None:
    server = PolicyServer(EchoModel(), port=0).start_in_thread()
    client = _client(server)
    client.connect()
    server.stop()
    with pytest.raises(ConnectionLost, match=f"ws://127.0.0.1:{server.port}"):
        client.infer(OBS)
    assert not client.connected


@pytest.mark.slow
def test_pings_are_answered_during_a_long_inference(start_server: Start) -> None:
    server = start_server(EchoModel(infer_sleep_s=3.0), ping_interval_s=0.5, ping_timeout_s=1.0)
    with _client(server, ping_interval_s=0.5, ping_timeout_s=1.0, request_timeout_s=10) as client:
        assert "actions" in client.infer(OBS)


def test_blocked_server_loop_raises_keepalive_timeout() -> None:
    async def blocking(ws: ServerConnection) -> None:
        await send_metadata(ws)
        await ws.recv()
        time.sleep(2.5)  # blocks the event loop like openpi's synchronous infer

    with RawServer(blocking) as raw:
        client = PolicyClient(
            "127.0.0.1", raw.port, ping_interval_s=0.2, ping_timeout_s=0.3, request_timeout_s=5
        )
        client.connect()
        started = time.monotonic()
        with pytest.raises(KeepaliveTimeout, match="keepalive ping timeout"):
            client.request(OBS)
        # ping after 0.2 s, no pong by 0.5 s, then at most close_timeout (1 s) to tear down
        assert time.monotonic() - started < 2.4
        assert isinstance(KeepaliveTimeout("x"), ConnectionLost)


def test_subclass_can_accept_a_text_acknowledgement() -> None:
    class AckClient(PolicyClient):
        def _on_text_frame(self, text: str) -> Any:
            if text == "reset successful":
                return text
            return super()._on_text_frame(text)

    async def dreamzero_like(ws: ServerConnection) -> None:
        await send_metadata(ws)
        async for message in ws:
            request = unpackb(message)
            if request["endpoint"] == "reset":
                await ws.send("reset successful")
            else:
                await ws.send(packb(np.zeros((24, 8), np.float32)))

    with RawServer(dreamzero_like) as raw:
        with AckClient("127.0.0.1", raw.port, connect_timeout_s=5) as client:
            assert client.request({"endpoint": "reset"}) == "reset successful"
            assert client.request({"endpoint": "infer"}).shape == (24, 8)
            assert client.connected


def test_batching_groups_concurrent_requests(start_server: Start) -> None:
    model = BatchModel()
    server = start_server(model, max_batch_size=4, max_wait_ms=200)
    clients = [_client(server) for _ in range(4)]
    for client in clients:
        client.connect()
    barrier = threading.Barrier(4)
    replies: list[Any] = [None] * 4

    def work(i: int) -> None:
        barrier.wait()
        replies[i] = clients[i].infer({"state": np.full(2, i, np.float32)})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for i, reply in enumerate(replies):
        np.testing.assert_array_equal(reply["actions"], np.full(2, 2 * i, np.float32))
        assert "infer_ms" in reply["server_timing"]
    assert max(model.batch_sizes) > 1 and sum(model.batch_sizes) == 4
    for client in clients:
        client.close()


def test_batch_failure_reaches_every_waiting_connection(start_server: Start) -> None:
    class BadBatch(BatchModel):
        def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
            raise ValueError("bad batch")

    server = start_server(BadBatch(), max_batch_size=2, max_wait_ms=1)
    with _client(server) as client:
        with pytest.raises(ServerError, match="ValueError: bad batch"):
            client.infer(OBS)


def test_port_in_use_fails_start_with_a_transport_error(start_server: Start) -> None:
    first = start_server(EchoModel())
    message = f"ws://127.0.0.1:{first.port}: server failed to start"
    with pytest.raises(TransportError, match=message):
        PolicyServer(EchoModel(), port=first.port).start_in_thread()


def test_endpoint_uri_keeps_full_uris() -> None:
    assert endpoint_uri("localhost", 8000) == "ws://localhost:8000"
    assert endpoint_uri("wss://proxy.example/policy", 8000) == "wss://proxy.example/policy"
    assert endpoint_uri("host", None) == "ws://host"
    assert PolicyClient("ws://h:1", None).endpoint == "ws://h:1"


def test_run_stops_cleanly_on_cancel() -> None:
    server = PolicyServer(EchoModel(), port=0)

    async def main() -> None:
        task = asyncio.create_task(server.serve())
        while not server.ready:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert not server.ready


_SERVE_SCRIPT = """
import sys, time
sys.path.insert(0, {fakes_dir!r})
from transport_fakes import EchoModel
from arena.transport import serve_model

class SlowLoad(EchoModel):
    def load(self):
        time.sleep(float(sys.argv[2]))

serve_model(SlowLoad(), "127.0.0.1", int(sys.argv[1]))
"""


@pytest.mark.parametrize("load_s", [0.0, 60.0], ids=["ready", "mid-load"])
def test_serve_model_stops_on_sigterm(load_s: float, tmp_path: Any) -> None:
    script = tmp_path / "serve.py"
    script.write_text(_SERVE_SCRIPT.format(fakes_dir=os.path.dirname(__file__)))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(script), str(port), str(load_s)])
    try:
        kind = "websocket" if load_s == 0 else "http:/healthz"
        wait_until_ready(kind, "127.0.0.1", port, 20, should_abort=lambda: (
            f"server exited with {proc.returncode}" if proc.poll() is not None else None
        ))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_lone_client_of_a_batching_server_does_not_wait_for_the_batch_window(start_server: Start) -> None:
    model = BatchModel()
    server = start_server(model, max_batch_size=8, max_wait_ms=2000)
    with _client(server) as client:
        started = time.monotonic()
        for _ in range(3):
            client.infer(OBS)
        assert time.monotonic() - started < 1.5  # not 3 x 2 s
    assert model.batch_sizes == [1, 1, 1]


def test_openpi_like_double_answers_like_openpi() -> None:
    from arena.testing.doubles import ChunkModel
    from arena.testing.openpi_like import ERROR_CLOSE_REASON, OpenPILikeServer

    class Picky(ChunkModel):
        def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
            if "prompt" not in obs:
                raise ValueError("Prompt is required")
            return super().infer(obs)

    with OpenPILikeServer(Picky((15, 8), "float64")) as server:
        assert _http_get(server.port, "/healthz")[0] == 200
        assert _http_get(server.port, "/")[0] == 426
        with PolicyClient("127.0.0.1", server.port) as client:
            first = client.infer({"prompt": "go"})
            second = client.infer({"prompt": "go"})
            assert first["actions"].dtype == np.float64 and first["actions"].shape == (15, 8)
            assert "prev_total_ms" not in first["server_timing"]
            assert second["server_timing"]["prev_total_ms"] >= 0
        with raw_connect(f"ws://127.0.0.1:{server.port}", compression=None) as ws:
            ws.recv()
            ws.send(packb({"no": "prompt"}))
            assert "ValueError: Prompt is required" in ws.recv()
            with pytest.raises(Exception) as info:
                ws.recv()
            assert info.value.rcvd.code == 1011 and info.value.rcvd.reason == ERROR_CLOSE_REASON
