"""Each way a server can answer wrongly is its own documented exception (protocols.md 2.6)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from transport_fakes import RawServer, send_metadata
from websockets.asyncio.server import ServerConnection

from arena.transport import (
    ConnectionLost,
    HandshakeError,
    InternalServerError,
    MissingMetadata,
    NonMapReply,
    PolicyClient,
    ProtocolError,
    ServerError,
    ServerTraceback,
    StringReply,
    UnexpectedTextFrame,
    packb,
)

OBS = {"state": np.zeros(3, np.float32)}
TRACEBACK = 'Traceback (most recent call last):\n  File "serve.py"\nValueError: Prompt is required'


def _client(port: int, **kw: Any) -> PolicyClient:
    kw.setdefault("connect_timeout_s", 5)
    kw.setdefault("request_timeout_s", 5)
    return PolicyClient("127.0.0.1", port, **kw)


def _reply_with(*frames: Any, close: tuple[int, str] | None = None, hold_s: float = 0.0):
    async def handler(ws: ServerConnection) -> None:
        await send_metadata(ws)
        await ws.recv()
        for frame in frames:
            await ws.send(frame)
        if close is not None:
            await ws.close(*close)
        elif hold_s:
            await ws.wait_closed()

    return handler


async def send_metadata_then_wait(ws: ServerConnection) -> None:
    await send_metadata(ws)
    await ws.wait_closed()

def test_text_frame_then_close_1011_is_a_server_traceback() -> None:
    handler = _reply_with(TRACEBACK, close=(1011, "Internal server error. Traceback included in previous frame."))
    with RawServer(handler) as raw, _client(raw.port) as client:
        with pytest.raises(ServerTraceback) as info:
            client.infer(OBS)
    assert info.value.traceback == TRACEBACK
    assert "Prompt is required" in str(info.value) and f":{raw.port}" in str(info.value)
    assert isinstance(info.value, ServerError) and not client.connected


def test_text_frame_without_close_is_an_unexpected_text_frame() -> None:
    with RawServer(_reply_with("reset successful", hold_s=5)) as raw, _client(raw.port) as client:
        started = time.monotonic()
        with pytest.raises(UnexpectedTextFrame) as info:
            client.infer(OBS)
    assert info.value.text == "reset successful"
    assert time.monotonic() - started < 3
    assert isinstance(info.value, ProtocolError) and not client.connected


def test_close_1011_without_traceback_is_an_internal_server_error() -> None:
    with RawServer(_reply_with(close=(1011, "out of GPU memory"))) as raw, _client(raw.port) as client:
        with pytest.raises(InternalServerError, match="1011.*out of GPU memory") as info:
            client.infer(OBS)
    assert info.value.traceback is None and info.value.reason == "out of GPU memory"


def test_string_reply_is_a_string_reply_and_the_connection_stays_usable() -> None:
    async def handler(ws: ServerConnection) -> None:
        await send_metadata(ws)
        await ws.recv()
        await ws.send(packb("CUDA error: device-side assert"))
        await ws.recv()
        await ws.send(packb({"actions": np.zeros((2, 3))}))

    with RawServer(handler) as raw, _client(raw.port) as client:
        with pytest.raises(StringReply) as info:
            client.infer(OBS)
        assert info.value.text == "CUDA error: device-side assert"
        assert client.infer(OBS)["actions"].shape == (2, 3)


@pytest.mark.parametrize("reply", [np.zeros((24, 8), np.float32), [1, 2], 3.5, None])
def test_non_map_reply_is_a_non_map_reply(reply: Any) -> None:
    with RawServer(_reply_with(packb(reply), hold_s=5)) as raw, _client(raw.port) as client:
        with pytest.raises(NonMapReply, match="expected a map reply") as info:
            client.infer(OBS)
    assert type(info.value.reply) is type(reply)


def test_no_metadata_frame_is_missing_metadata() -> None:
    async def silent(ws: ServerConnection) -> None:
        await ws.wait_closed()

    with RawServer(silent) as raw:
        started = time.monotonic()
        with pytest.raises(MissingMetadata, match="no metadata frame within 0.5 s"):
            _client(raw.port, connect_timeout_s=0.5).connect()
        assert time.monotonic() - started < 2.5


def test_closing_before_the_metadata_frame_is_missing_metadata() -> None:
    async def rude(ws: ServerConnection) -> None:
        await ws.close(1000, "bye")

    with RawServer(rude) as raw:
        with pytest.raises(MissingMetadata, match="without sending the metadata frame"):
            _client(raw.port).connect()


def test_non_map_metadata_is_missing_metadata() -> None:
    async def wrong(ws: ServerConnection) -> None:
        await ws.send(packb([1, 2]))
        await ws.wait_closed()

    with RawServer(wrong) as raw:
        with pytest.raises(MissingMetadata, match="metadata frame is a list"):
            _client(raw.port).connect()


def test_traceback_instead_of_metadata_is_a_server_traceback() -> None:
    async def failing(ws: ServerConnection) -> None:
        await ws.send(TRACEBACK)
        await ws.close(1011, "Internal server error. Traceback included in previous frame.")

    with RawServer(failing) as raw:
        with pytest.raises(ServerTraceback, match="instead of the metadata frame"):
            _client(raw.port).connect()


def test_the_exceptions_are_distinct_types() -> None:
    kinds = [ServerTraceback, InternalServerError, UnexpectedTextFrame, StringReply, NonMapReply, MissingMetadata]
    assert len(set(kinds)) == len(kinds)
    for a in kinds:
        for b in kinds:
            assert a is b or not issubclass(a, b)
    assert not issubclass(MissingMetadata, ConnectionLost)


def _refuse_first(n: int, status: int, body: str):
    """A ``process_request`` hook answering the first ``n`` handshakes with ``status``."""
    seen = {"handshakes": 0}

    def process_request(connection: ServerConnection, request: Any):
        seen["handshakes"] += 1
        if seen["handshakes"] <= n:
            return connection.respond(status, body)
        return None

    return process_request, seen


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_server_answering_not_now_is_retried_until_it_accepts(status: int) -> None:
    # A proxy whose backend restarts (502/504), a server shutting down or at its cap (503).
    hook, seen = _refuse_first(2, status, "restarting\n")
    with RawServer(send_metadata_then_wait, process_request=hook) as raw:
        client = _client(raw.port)
        assert client.connect() == {}
        assert seen["handshakes"] == 3 and client.saw_server_down
        client.close()


def test_a_server_refusing_with_503_past_the_deadline_is_a_handshake_error_with_its_reason() -> None:
    hook, seen = _refuse_first(10**6, 503, "server at its connection limit (3 connections)\n")
    with RawServer(send_metadata_then_wait, process_request=hook) as raw:
        started = time.monotonic()
        with pytest.raises(HandshakeError, match=r"HTTP 503: server at its connection limit \(3 connections\) \(still after retrying for 1 s\)"):
            _client(raw.port, connect_timeout_s=1).connect()
        assert 1 <= time.monotonic() - started < 4 and seen["handshakes"] >= 2


def test_a_status_that_will_not_change_is_not_retried() -> None:
    hook, seen = _refuse_first(10**6, 404, "no such path\n")
    with RawServer(send_metadata_then_wait, process_request=hook) as raw:
        with pytest.raises(HandshakeError, match=r"HTTP 404: no such path$"):
            _client(raw.port).connect()
        assert seen["handshakes"] == 1


def test_a_server_closing_before_answering_the_handshake_is_connected_to_again() -> None:
    # The window of a restart seen in CI: the old server's socket accepted the connection,
    # then the server went down without an HTTP answer; the new one comes up on the port.
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = _client(port, connect_timeout_s=10)
    outcome: dict[str, Any] = {}
    connecting = threading.Thread(target=lambda: outcome.update(metadata=client.connect()), daemon=True)
    connecting.start()
    accepted, _ = listener.accept()
    accepted.recv(4096)  # the client's HTTP upgrade request, never answered
    accepted.close()
    listener.close()
    with RawServer(send_metadata_then_wait, port=port):
        connecting.join(10)
        assert outcome.get("metadata") == {} and client.saw_server_down
        client.close()


@pytest.mark.parametrize("code", [1001, 1012, 1013])
def test_a_server_going_away_before_its_metadata_is_connected_to_again(code: int) -> None:
    # The window of a restart: the old server accepted, then closed going away.
    connections = {"n": 0}

    async def restarting(ws: ServerConnection) -> None:
        connections["n"] += 1
        if connections["n"] == 1:
            await ws.close(code, "restarting")
            return
        await send_metadata_then_wait(ws)

    with RawServer(restarting) as raw:
        client = _client(raw.port)
        assert client.connect() == {}
        assert connections["n"] == 2 and client.saw_server_down
        client.close()


def test_a_server_always_going_away_is_missing_metadata_once_the_deadline_passes() -> None:
    async def leaving(ws: ServerConnection) -> None:
        await ws.close(1001, "going away")

    with RawServer(leaving) as raw:
        started = time.monotonic()
        with pytest.raises(MissingMetadata, match=r"code 1001: going away\) without sending the metadata frame"):
            _client(raw.port, connect_timeout_s=1).connect()
        # bounded: it gave up after its 1 s deadline, not at once and not never (the upper bound is
        # generous, a check that it ends, not of speed: a loaded CI machine is slow)
        assert 1 <= time.monotonic() - started < 30
