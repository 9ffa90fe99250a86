"""``arena.policies.chunks.ChunkBroker``: queue semantics under any sequence of events.

The state machine drives the broker with chunk arrivals (of any length, for any envs, with or
without a latency), takes, episode resets, reconnect discards and changes of the active set,
and checks it against a plain per-env list of row ids. Every row put carries its own id
(``chunk * 1000 + row``) in every column, so each row handed out names the chunk and the row
it came from.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from arena.policies.chunks import ChunkBroker

N_MAX = 4
A = 3


def _chunk(chunk_no: int, rows: int) -> np.ndarray:
    ids = chunk_no * 1000 + np.arange(rows, dtype=np.float64)
    return np.repeat(ids[:, None], A, axis=1)


class BrokerMachine(RuleBasedStateMachine):
    @initialize(n=st.integers(1, N_MAX), horizon=st.integers(1, 5))
    def build(self, n: int, horizon: int) -> None:
        self.n, self.horizon = n, horizon
        self.broker = ChunkBroker(n, horizon, A)
        self.queue: list[list[float]] = [[] for _ in range(n)]  # row ids still to replay, per env
        self.active = set(range(n))
        self.discarded: set[float] = set()
        self.replayed: set[float] = set()
        self.requests = [0] * n
        self.latencies = [0] * n
        self.chunks = 0

    def _envs(self, data: st.DataObject, min_size: int = 0) -> list[int]:
        return data.draw(st.lists(st.integers(0, self.n - 1), min_size=min_size, unique=True))

    def _drop(self, env: int) -> None:
        self.discarded.update(self.queue[env])
        self.queue[env] = []

    @rule(data=st.data(), rows=st.integers(1, 8), with_latency=st.booleans())
    def arrive(self, data: st.DataObject, rows: int, with_latency: bool) -> None:
        envs = self._envs(data, min_size=1)
        chunks = []
        for e in envs:
            self.chunks += 1
            chunks.append(_chunk(self.chunks, rows))
            self._drop(e)  # the previous chunk, used up or not, is replaced
            self.queue[e] = list(chunks[-1][: self.horizon, 0])
            self.requests[e] += 1
            self.latencies[e] += with_latency
        self.broker.put(envs, np.stack(chunks), latency_ms=1.5 if with_latency else None)

    @rule(data=st.data(), bare=st.booleans())
    def take(self, data: st.DataObject, bare: bool) -> None:
        envs = self._envs(data)
        mask = np.zeros(self.n, bool)
        mask[envs] = True
        before = self.broker.index.copy()
        if any(not self.queue[e] for e in envs):
            with pytest.raises(RuntimeError, match="no chunk row left"):
                self.broker.take(mask)
            assert (self.broker.index == before).all()  # nothing advanced
            return
        out = self.broker.take(mask if bare else envs)
        assert out.shape == (self.n, A)
        for e in range(self.n):
            if e not in envs:
                assert (out[e] == 0).all()
                continue
            row = float(out[e, 0])
            assert (out[e] == row).all()
            assert row not in self.discarded, "a discarded row was replayed"
            assert row not in self.replayed, "a row was replayed twice"
            assert row % 1000 < self.horizon, "a row beyond the open-loop horizon was replayed"
            assert row == self.queue[e].pop(0), "rows replay in order"
            self.replayed.add(row)

    @rule(data=st.data(), everyone=st.booleans())
    def reset(self, data: st.DataObject, everyone: bool) -> None:
        envs = list(range(self.n)) if everyone else self._envs(data)
        self.broker.reset(None if everyone else envs)
        for e in envs:
            self._drop(e)
            self.requests[e] = self.latencies[e] = 0

    @rule(data=st.data(), everyone=st.booleans())
    def reconnect(self, data: st.DataObject, everyone: bool) -> None:
        envs = list(range(self.n)) if everyone else self._envs(data)
        self.broker.discard(None if everyone else envs)
        for e in envs:
            self._drop(e)  # records are kept

    @rule(data=st.data())
    def set_active(self, data: st.DataObject) -> None:
        envs = self._envs(data)
        self.broker.set_active(envs)
        self.active = set(envs)

    @precondition(lambda self: hasattr(self, "broker"))
    @invariant()
    def due_and_records_match(self) -> None:
        due = [e in self.active and not self.queue[e] for e in range(self.n)]
        assert self.broker.due().tolist() == due
        assert self.broker.requests.tolist() == self.requests
        for e in range(self.n):
            assert len(self.broker.latency_ms(e)) == self.latencies[e], "one latency record per request"
            info = self.broker.episode_info(e)
            assert info.get("latency", {}).get("requests", 0) == self.latencies[e]
        assert (self.broker.length <= self.horizon).all()


TestBrokerMachine = BrokerMachine.TestCase
TestBrokerMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@given(st.integers(1, 6), st.integers(1, 40))
def test_a_chunk_replays_exactly_its_first_open_loop_horizon_rows(horizon, rows):
    broker = ChunkBroker(1, horizon, A)
    broker.put([0], _chunk(1, rows))
    got = []
    while not broker.due()[0]:
        got.append(float(broker.take([0])[0, 0]))
    assert got == list(_chunk(1, rows)[: min(rows, horizon), 0])


def test_rows_keep_the_chunks_dtype_and_out_sets_the_simulators():
    broker = ChunkBroker(2, 2, 1)
    broker.put([0], np.array([[0.1], [0.2]], np.float32))
    assert broker.take([0]).dtype == np.float32
    precise = np.array([[1 / 3], [2 / 3]], np.float64)
    broker.put([1], precise)  # a wider chunk widens the rows: nothing is rounded on the way
    assert broker.rows.dtype == np.float64
    assert broker.take([0, 1])[1, 0] == 1 / 3 and broker.rows[0, 1, 0] == np.float32(0.2)
    out = np.zeros((2, 1), np.float32)
    assert broker.take([1], out=out) is out and out[1, 0] == np.float32(2 / 3)


def test_idle_envs_are_never_due_and_a_missing_row_is_an_error_naming_the_env():
    broker = ChunkBroker(3, 2, 1, active=[0, 2])
    assert broker.due().tolist() == [True, False, True]
    with pytest.raises(RuntimeError, match=r"\[0, 2\]"):
        broker.take(broker.active)


def test_server_timing_is_summarized_per_env_and_reset_forgets_it():
    broker = ChunkBroker(2, 1, 1)
    for ms in (4.0, 6.0):
        broker.put([0, 1], np.zeros((2, 1, 1)), latency_ms=10.0, server_infer_ms=ms)
    info = broker.episode_info(1)
    assert info["latency"]["requests"] == 2 and info["server_timing"] == {"infer_ms_mean": 5.0, "infer_ms_max": 6.0}
    broker.discard()  # a reconnect keeps the records
    assert broker.episode_info(1)["latency"]["requests"] == 2
    broker.reset([1])
    assert broker.episode_info(1) == {} and broker.episode_info(0)["latency"]["requests"] == 2
    assert broker.episode_info(7) == {}


@pytest.mark.parametrize(
    ("envs", "chunks", "match"),
    [([0], np.zeros((2, 3)), r"expected \(1, H>=1, 1\)"), ([0, 1], np.zeros((1, 2, 1)), "expected"), ([1, 1], np.zeros((2, 2, 1)), "repeat")],
)
def test_malformed_puts_are_refused(envs, chunks, match):
    with pytest.raises(ValueError, match=match):
        ChunkBroker(2, 2, 1).put(envs, chunks)


def test_concurrent_puts_and_discards_never_leave_a_row_beyond_the_horizon():
    broker = ChunkBroker(8, 3, 2)
    stop = threading.Event()

    def fetcher(env: int) -> None:
        k = 0
        while not stop.is_set():
            k += 1
            broker.put([env], np.full((5, 2), env * 1e4 + k, np.float64), latency_ms=1.0)

    threads = [threading.Thread(target=fetcher, args=(e,)) for e in range(8)]
    for t in threads:
        t.start()
    for _ in range(300):
        broker.discard()
        assert (broker.length <= 3).all()
    stop.set()
    for t in threads:
        t.join()
    for e in range(8):
        if not broker.due()[e]:
            assert broker.take([e])[e, 0] // 1e4 == e  # each env only ever got its own rows
        assert len(broker.latency_ms(e)) == broker.requests[e]
