"""arena's policy server against hostile input and bad luck, as real server processes.

What each test measures is what a user of a shared server sees: the server's memory (VmRSS and
its peak VmHWM from /proc), how long ``/healthz`` takes to answer during an attack, which
connections are refused and with what, and that the clients already connected keep working.
Bounds are generous: they separate "bounded" from the failures of the issue (4.8 GB and 28 s
of blocked health checks, idle servers at +64 MiB, connections never refused).
"""

from __future__ import annotations

import http.client
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.sync.client import connect as raw_connect

from arena.testing.doubles import ServerProcess
from arena.transport import HandshakeError, PolicyClient
from arena.transport.probe import wait_until_ready

OBS = {"observation/state": np.zeros(3, np.float32), "prompt": "hold"}


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for pid {pid}")


def _healthz_s(port: int, timeout_s: float = 30.0) -> float:
    """Seconds until ``GET /healthz`` answered 200."""
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    return time.monotonic() - started


def _client(port: int, **kw: Any) -> PolicyClient:
    kw.setdefault("connect_timeout_s", 10.0)
    kw.setdefault("request_timeout_s", 30.0)
    return PolicyClient("127.0.0.1", port, **kw)


def _empty_arrays(count: int) -> bytes:
    return b"\xdd" + count.to_bytes(4, "big") + b"\x90" * count


@pytest.mark.slow
def test_a_64_mib_frame_of_67_million_empty_arrays_is_refused_and_healthz_answers_meanwhile() -> None:
    """Issue 16.1: this frame took the server to 4.8 GB and blocked /healthz for 28 s."""
    attack = _empty_arrays(64 * 2**20 - 5)  # exactly the default max_message_bytes
    with ServerProcess("arena", "--action-shape", "4", "3") as server:
        bystander = _client(server.port)
        bystander.connect()
        bystander.infer(OBS)
        baseline = _status_mb(server.pid, "VmRSS")
        waits: list[float] = []
        attacking = threading.Event()
        done = threading.Event()

        def poll_healthz() -> None:
            attacking.wait(10)
            while not done.is_set():
                waits.append(_healthz_s(server.port))
                time.sleep(0.02)

        poller = threading.Thread(target=poll_healthz)
        poller.start()
        texts = []
        try:
            for _ in range(3):  # one after another, each on a fresh connection
                with raw_connect(f"ws://127.0.0.1:{server.port}", compression=None, max_size=None,
                                 proxy=None, open_timeout=10) as ws:
                    ws.recv(timeout=10)  # metadata
                    attacking.set()
                    started = time.monotonic()
                    ws.send(attack)
                    texts.append(ws.recv(timeout=60))
                    assert time.monotonic() - started < 20
                    with pytest.raises(Exception):
                        ws.recv(timeout=10)
                    assert ws.close_code == 1011
                assert bystander.infer(OBS)["actions"].shape == (4, 3)  # others keep being served
        finally:
            done.set()
            poller.join(60)
        peak = _status_mb(server.pid, "VmHWM")
        bystander.close()
    for text in texts:
        assert isinstance(text, str) and "CodecError" in text and "msgpack objects" in text
    assert waits and max(waits) < 3.0, waits
    # The frame itself is buffered and copied a few times (64 MiB each); never gigabytes.
    assert peak - baseline < 700, (baseline, peak)


@pytest.mark.slow
def test_an_idle_server_returns_to_its_baseline_memory_after_a_big_request() -> None:
    """Issue 16.2: the last request stayed alive until the next one arrived (+2x its size)."""
    with ServerProcess("arena", "--action-shape", "4", "3") as server:
        client = _client(server.port)
        client.connect()
        for _ in range(3):
            client.infer(OBS)
        time.sleep(0.5)
        baseline = _status_mb(server.pid, "VmRSS")
        client.infer({"observation/image": np.ones(48 * 2**20, np.uint8)})
        deadline = time.monotonic() + 10
        while (now := _status_mb(server.pid, "VmRSS")) > baseline + 16 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert now <= baseline + 16, f"idle server at {now:.0f} MB, baseline {baseline:.0f} MB"
        assert client.infer(OBS)["actions"].shape == (4, 3)
        client.close()


def test_connections_beyond_the_cap_get_503_with_the_reason_and_the_others_keep_working() -> None:
    with ServerProcess("arena", "--action-shape", "4", "3", "--max-connections", "3") as server:
        clients = [_client(server.port) for _ in range(3)]
        for client in clients:
            client.connect()
        with pytest.raises(HandshakeError, match=r"HTTP 503: server at its connection limit \(3 connections\)"):
            _client(server.port, connect_timeout_s=5).connect()
        assert _healthz_s(server.port) < 5  # health checks are not connections
        for client in clients:
            assert client.infer(OBS)["actions"].shape == (4, 3)
        clients.pop().close()
        deadline = time.monotonic() + 10
        while True:  # the server sees the close a moment later
            try:
                newcomer = _client(server.port, connect_timeout_s=5)
                newcomer.connect()
                break
            except HandshakeError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert newcomer.infer(OBS)["actions"].shape == (4, 3)
        for client in [*clients, newcomer]:
            client.close()


def test_a_connection_that_never_completes_the_handshake_is_closed() -> None:
    with ServerProcess("arena", "--action-shape", "4", "3", "--handshake-timeout-s", "1") as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        partial = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        partial.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finishes its request
        started = time.monotonic()
        for sock in (silent, partial):
            with sock:
                assert sock.recv(1024) == b""  # closed by the server
        assert 0.5 < time.monotonic() - started < 8


def test_a_silent_handshaken_client_is_not_closed_while_it_answers_pings() -> None:
    with ServerProcess("arena", "--action-shape", "4", "3", "--handshake-timeout-s", "0.5",
                       "--ping-interval-s", "0.3") as server:
        client = _client(server.port, ping_interval_s=None)  # the client only answers pings
        client.connect()
        time.sleep(3)  # silent for 6 handshake timeouts and 10 ping intervals
        assert client.infer(OBS)["actions"].shape == (4, 3)
        client.close()


class _LimitedFiles(ServerProcess):
    """arena's server double started with a hard open-file limit of ``nofile``."""

    def __init__(self, nofile: int, *args: str, **kw: Any) -> None:
        super().__init__("arena", *args, **kw)
        code = (f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
                f"from arena.testing.doubles import main; main()")
        self.argv = [sys.executable, "-c", code, *self.argv[3:]]


@pytest.mark.slow
def test_more_connections_than_open_files_neither_floods_the_log_nor_breaks_the_server(tmp_path: Path) -> None:
    """Issue 16.3: ~21,000 idle connections exhausted the open files; new clients failed for
    ~20 s and the log filled with 14.6 MB of accept tracebacks."""
    log = tmp_path / "server.log"
    with _LimitedFiles(128, "--action-shape", "4", "3", "--handshake-timeout-s", "2", log_path=log) as server:
        client = _client(server.port)
        client.connect()
        idle = []
        for _ in range(400):
            try:
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            except OSError:
                break
        assert client.infer(OBS)["actions"].shape == (4, 3)  # the connected client is served
        # at the open-file limit a new connection may be shed at once; the server recovers
        # as the idle ones reach their handshake timeout (2 s), so a probe gets through
        started = time.monotonic()
        wait_until_ready("http:/healthz", "127.0.0.1", server.port, 30)  # raises ReadinessTimeout
        assert time.monotonic() - started < 30
        for sock in idle:
            sock.close()
        newcomer = _client(server.port, connect_timeout_s=20)
        newcomer.connect()
        assert newcomer.infer(OBS)["actions"].shape == (4, 3)
        newcomer.close()
        client.close()
    text = log.read_text()
    assert len(text) < 50_000, f"{len(text)} bytes of log"
    assert "open-file limit is 128" in text
