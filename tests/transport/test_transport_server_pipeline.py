"""How arena's server runs the model: batching by default, replies in order to their own
connection, short inferences inline and long ones off the event loop, bounded client decoding."""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable

import numpy as np
import pytest
from transport_fakes import BatchModel, EchoModel, RawServer, send_metadata
from websockets.asyncio.server import ServerConnection
from websockets.sync.client import connect as raw_connect

from arena.transport import PolicyClient, PolicyServer, ProtocolError, packb, unpackb
from arena.transport.ratelimit import RateLimitedFilter
from arena.transport.policy_server import DEFAULT_MAX_BATCH_SIZE

Start = Callable[..., PolicyServer]


def _client(server: PolicyServer, **kw: Any) -> PolicyClient:
    kw.setdefault("connect_timeout_s", 10.0)
    kw.setdefault("request_timeout_s", 30.0)
    return PolicyClient("127.0.0.1", server.port, **kw)


def _concurrently(clients: list[PolicyClient], work: Callable[[int, PolicyClient], Any]) -> list[Any]:
    barrier = threading.Barrier(len(clients))
    results: list[Any] = [None] * len(clients)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i, clients[i])
        except BaseException as exc:  # noqa: BLE001 - reported below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def test_models_with_infer_batch_are_batched_by_default(start_server: Start) -> None:
    model = BatchModel()
    server = start_server(model)  # no batching options at all
    assert server.batching and server.max_batch_size == DEFAULT_MAX_BATCH_SIZE == 64
    clients = [_client(server) for _ in range(6)]
    for client in clients:
        client.connect()
    for round_ in range(5):  # rounds of six concurrent requests
        if round_ == 2:  # a quiet spell: one client alone, six times (batches of one)
            for _ in range(6):
                clients[0].infer({"state": np.zeros(2, np.float32)})
        seen = len(model.batch_sizes)
        replies = _concurrently(clients, lambda i, c: c.infer({"state": np.full(2, i, np.float32)}))
        for i, reply in enumerate(replies):
            np.testing.assert_array_equal(reply["actions"], np.full(2, 2 * i, np.float32))
        assert max(model.batch_sizes[seen:]) > 1, model.batch_sizes  # batching resumes
    assert sum(model.batch_sizes) == 5 * 6 + 6
    for client in clients:
        client.close()


def test_models_without_infer_batch_and_max_batch_size_1_are_not_batched(start_server: Start) -> None:
    assert not start_server(EchoModel()).batching
    model = BatchModel()
    assert not start_server(model, max_batch_size=1).batching


class _IdModel(EchoModel):
    """Echoes ``obs["id"]`` after a random short delay; thread-safe (two batches at once)."""

    concurrent_batches = 2

    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []
        self.threads: set[str] = set()
        self._random = random.Random(0)
        self._lock = threading.Lock()

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            self.batch_sizes.append(len(batch))
            self.threads.add(threading.current_thread().name)
            delay = self._random.uniform(0.0, 0.01)
        time.sleep(delay)
        return [{"id": obs["id"], "actions": np.full(2, obs["id"], np.int64)} for obs in batch]


def test_every_reply_goes_to_its_own_connection_in_order(start_server: Start) -> None:
    model = _IdModel()
    server = start_server(model, max_wait_ms=1)
    clients = [_client(server) for _ in range(8)]
    for client in clients:
        client.connect()

    def work(i: int, client: PolicyClient) -> list[int]:
        seen = []
        for n in range(25):
            request_id = 1000 * i + n
            reply = client.infer({"id": request_id})
            assert reply["actions"].tolist() == [request_id, request_id]
            seen.append(reply["id"])
        return seen

    for i, seen in enumerate(_concurrently(clients, work)):
        assert seen == [1000 * i + n for n in range(25)]
    assert sum(model.batch_sizes) == 8 * 25  # every request was inferred exactly once
    assert len(model.threads) == 2  # two batches were in the model at once
    for client in clients:
        client.close()


def test_pipelined_requests_on_one_connection_are_answered_in_order(start_server: Start) -> None:
    server = start_server(_IdModel())
    with raw_connect(f"ws://127.0.0.1:{server.port}", compression=None, proxy=None) as ws:
        ws.recv(timeout=10)
        for n in range(10):
            ws.send(packb({"id": n}))
        assert [unpackb(ws.recv(timeout=10))["id"] for _ in range(10)] == list(range(10))


class _ThreadModel(EchoModel):
    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.threads: list[str] = []

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        return super().infer(obs)


def test_short_inferences_run_inline_after_a_first_call_on_the_inference_thread(start_server: Start) -> None:
    model = _ThreadModel()
    server = start_server(model)
    with _client(server) as client:
        for _ in range(4):
            client.infer({"state": np.zeros(2)})
    assert model.threads[0] == "arena-infer-0"  # unknown duration: off the loop
    assert set(model.threads[1:]) == {"arena-policy-server"}  # the event-loop thread


def test_under_steady_load_an_unbatched_server_settles_into_running_inline(start_server: Start) -> None:
    model = _ThreadModel(infer_sleep_s=0.01)  # slower than the clients: a queue forms at once
    server = start_server(model)  # no infer_batch: one request at a time, like openpi's server
    clients = [_client(server) for _ in range(4)]
    for client in clients:
        client.connect()
    _concurrently(clients, lambda i, c: [c.infer({"state": np.zeros(2)}) for _ in range(25)])
    assert model.threads[0] == "arena-infer-0"
    assert set(model.threads[-40:]) == {"arena-policy-server"}, model.threads  # the queue drained
    for client in clients:
        client.close()


def test_inline_can_be_turned_off_and_long_inferences_never_run_inline(start_server: Start) -> None:
    never = _ThreadModel()
    server = start_server(never, inline_below_ms=None)
    with _client(server) as client:
        for _ in range(3):
            client.infer({"state": np.zeros(2)})
    assert set(never.threads) == {"arena-infer-0"}
    slow = _ThreadModel(infer_sleep_s=0.06)
    server = start_server(slow, inline_below_ms=50)
    with _client(server) as client:
        for _ in range(3):
            client.infer({"state": np.zeros(2)})
    assert set(slow.threads) == {"arena-infer-0"}


def test_a_client_refuses_a_reply_of_millions_of_empty_arrays_at_once() -> None:
    async def hostile(ws: ServerConnection) -> None:
        await send_metadata(ws)
        await ws.recv()
        await ws.send(b"\xdd" + (16 * 2**20).to_bytes(4, "big") + b"\x90" * (16 * 2**20))

    with RawServer(hostile, max_size=None) as raw:
        with PolicyClient("127.0.0.1", raw.port, connect_timeout_s=10, request_timeout_s=30) as client:
            started = time.monotonic()
            with pytest.raises(ProtocolError, match="undecodable reply.*more than 1,048,576 msgpack objects"):
                client.request({"state": np.zeros(2)})
            assert time.monotonic() - started < 5  # decoding it would take ~1.3 GB and seconds


def test_rate_limited_log_passes_a_burst_then_counts_what_it_held_back() -> None:
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("arena.tests.ratelimit")
    logger.propagate = False
    logger.addHandler(Collect())
    limit = RateLimitedFilter(burst=3, period_s=0.3)
    logger.addFilter(limit)
    for n in range(50):
        logger.error("connection %d failed", n)
    logger.error("another kind")
    assert records == ["connection 0 failed", "connection 1 failed", "connection 2 failed", "another kind"]
    time.sleep(0.35)
    logger.error("connection %d failed", 99)
    assert records[-1] == "connection 99 failed (47 similar messages suppressed in the last 0.3 s)"


@pytest.mark.slow
def test_arena_serve_batches_a_model_with_infer_batch_by_default(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    from transport_fakes import free_port

    from arena.transport import wait_until_ready

    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONPATH": os.path.dirname(__file__)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "arena", "serve", "transport_fakes:BatchSizeModel",
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_until_ready("http:/readyz", "127.0.0.1", port, 60, should_abort=lambda: (
            f"arena serve exited with {proc.returncode}" if proc.poll() is not None else None))
        clients = [PolicyClient("127.0.0.1", port, connect_timeout_s=10, request_timeout_s=30) for _ in range(6)]
        for client in clients:
            client.connect()
        sizes = []
        for _ in range(4):  # rounds of six concurrent requests
            sizes += [reply["batch"] for reply in _concurrently(clients, lambda i, c: c.infer({"i": i}))]
        assert max(sizes) > 1, sizes  # grouped, with no batching option given
        for client in clients:
            client.close()
    finally:
        proc.terminate()
        proc.wait(10)
    assert "batches of up to 64, 2 ms wait" in log.read_text()
