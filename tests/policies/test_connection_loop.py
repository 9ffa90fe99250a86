"""ConnectionLoop's rules (retry, back-off, reconnect, give-up) with a scripted WireClient;
the real servers' faults are in test_remote_give_up.py and the GR00T/DreamZero plugin tests."""

from __future__ import annotations

from typing import Any

import pytest

from arena.policies.adapters import ProtocolViolation
import numpy as np

from arena.policies.connection import ConnectionGaveUp, ConnectionLoop, ServerChanged, ServerWatch, backoff_s
from arena.transport.client import PolicyClient
from arena.transport.errors import (
    ConnectionLost,
    ProtocolError,
    RemoteError,
    RequestTimeout,
    ServerTraceback,
    ServerUnavailable,
)
from arena.transport.interface import WireClient


class Scripted:
    """A WireClient whose ``infer`` and ``connect`` outcomes come from scripts: a value is
    returned, an exception raised."""

    def __init__(self, replies: list[Any], connects: list[Any] | None = None) -> None:
        self.endpoint = "ws://scripted:1"
        self.saw_server_down = False
        self.metadata: dict[str, Any] | None = None
        self.replies = list(replies)
        self.connects = list(connects or [])
        self.is_open = False
        self.log: list[str] = []

    @property
    def connected(self) -> bool:
        return self.is_open

    def connect(self, timeout_s: float | None = None) -> dict[str, Any]:
        self.log.append(f"connect {timeout_s}")
        outcome = self.connects.pop(0) if self.connects else {"model": "scripted"}
        if isinstance(outcome, BaseException):
            raise outcome
        self.is_open, self.metadata = True, outcome
        return outcome

    def infer(self, request: dict[str, Any]) -> Any:
        self.log.append("infer")
        outcome = self.replies.pop(0)
        if isinstance(outcome, BaseException):
            if isinstance(outcome, (ConnectionLost, RequestTimeout)):
                self.is_open = False
            raise outcome
        return outcome

    def start_episode(self, env_id: int, info: dict[str, Any]) -> None:
        pass

    def end_episode(self, env_id: int, info: dict[str, Any]) -> None:
        pass

    def expect_warmup(self) -> None:
        pass

    def close(self) -> None:
        self.log.append("close")
        self.is_open = False


def _loop(client: Scripted, attempts: int = 2, **kw: Any) -> tuple[ConnectionLoop, list[float], list[str]]:
    slept: list[float] = []
    faults: list[str] = []
    loop = ConnectionLoop(
        client, reconnect_timeout_s=7, max_reconnect_attempts=attempts, sleep=slept.append,
        on_fault=lambda exc: faults.append(type(exc).__name__), **kw,
    )
    return loop, slept, faults


def test_a_dropped_connection_is_reopened_with_back_off_and_the_request_retried():
    client = Scripted([ConnectionLost("drop"), RequestTimeout("slow"), {"ok": 1}])
    loop, slept, faults = _loop(client)
    loop.connect()
    reply = loop.call(lambda c: c.infer({}))
    assert reply.value == {"ok": 1} and reply.latency_ms >= 0
    assert slept == [0.2, 0.4] and faults == ["ConnectionLost", "RequestTimeout"]
    assert loop.reconnects == 2 and client.log.count("connect 7") == 2  # reconnects wait reconnect_timeout_s


def test_the_attempts_run_out_into_one_error_naming_the_last_fault():
    client = Scripted([ConnectionLost("a"), ConnectionLost("b"), RequestTimeout("no reply within 1 s")])
    loop, slept, faults = _loop(client, attempts=2)
    loop.connect()
    with pytest.raises(ConnectionGaveUp) as info:
        loop.call(lambda c: c.infer({}))
    assert str(info.value) == "RequestTimeout: no reply within 1 s"
    assert isinstance(info.value.fault, RequestTimeout) and info.value.reconnect_error is None
    assert len(faults) == 2 and loop.reconnects == 2  # the give-up itself drops nothing more


def test_a_reconnect_that_finds_no_server_gives_up_at_once():
    client = Scripted([ConnectionLost("dropped")], connects=[{}, ServerUnavailable("nothing within 7 s")])
    loop, slept, _ = _loop(client, attempts=5)
    loop.connect()
    with pytest.raises(ConnectionGaveUp, match=r"^reconnect failed: ServerUnavailable: nothing within 7 s \(after ConnectionLost: dropped\)$"):
        loop.call(lambda c: c.infer({}))
    assert slept == [0.2] and loop.reconnects == 0


@pytest.mark.parametrize("error", [ProtocolError("bad"), RemoteError("model said no"), ProtocolViolation("NaN")])
def test_what_the_same_request_would_meet_again_is_raised_unchanged_without_retry(error):
    client = Scripted([error])
    loop, slept, faults = _loop(client)
    loop.connect()
    with pytest.raises(type(error)) as info:
        loop.call(lambda c: c.infer({}))
    assert info.value is error and slept == [] and faults == [] and client.connected


def test_a_closed_connection_is_reopened_without_using_up_the_give_up_check():
    # max_reconnect_attempts 0: a request fault gives up at once, but a connection dropped by
    # the previous give-up is still opened again for the next request
    client = Scripted([{"ok": 2}])
    loop, slept, faults = _loop(client, attempts=0)
    reply = loop.call(lambda c: c.infer({}))  # never connected
    assert reply.value == {"ok": 2} and faults == ["ConnectionLost"] and loop.reconnects == 1


def test_retryable_decides_which_faults_are_retried():
    client = Scripted([ServerTraceback("Traceback ...", "Traceback ...")])
    loop, slept, _ = _loop(client, retryable=lambda exc: isinstance(exc, ConnectionLost))
    loop.connect()
    with pytest.raises(ServerTraceback):
        loop.call(lambda c: c.infer({}))
    assert slept == []


def test_a_server_refused_by_on_connect_is_closed_and_the_error_raised():
    def refuse(client: WireClient) -> None:
        raise ProtocolViolation(f"{client.endpoint} predicts velocities")

    client = Scripted([])
    loop, _, _ = _loop(client, on_connect=refuse)
    with pytest.raises(ProtocolViolation, match="velocities"):
        loop.connect()
    assert not client.connected and client.log[-1] == "close"


def test_once_a_reconnect_found_no_server_later_reconnects_of_every_loop_check_only_briefly():
    # two loops of one policy (two envs), one watch: the first finds the server gone after the
    # full 7 s; later reconnects (the next episode, the other env) wait recheck_timeout_s
    watch = ServerWatch()
    gone = ServerUnavailable("nothing within 7 s")
    a = Scripted([ConnectionLost("dropped")], connects=[{}, gone, ServerUnavailable("nothing within 0.5 s")])
    b = Scripted([ConnectionLost("dropped")], connects=[{}, ServerUnavailable("nothing within 0.5 s")])
    loop_a, _, _ = _loop(a, attempts=3, watch=watch, recheck_timeout_s=0.5)
    loop_b, _, _ = _loop(b, attempts=3, watch=watch, recheck_timeout_s=0.5)
    loop_a.connect()
    loop_b.connect()
    with pytest.raises(ConnectionGaveUp, match="within 7 s"):
        loop_a.call(lambda c: c.infer({}))
    assert watch.gone is gone
    with pytest.raises(ConnectionGaveUp, match="within 0.5 s"):
        loop_a.call(lambda c: c.infer({}))  # the next episode: not connected, one brief check
    with pytest.raises(ConnectionGaveUp, match="within 0.5 s"):
        loop_b.call(lambda c: c.infer({}))
    assert a.log == ["connect None", "infer", "connect 7", "connect 0.5"]
    assert b.log == ["connect None", "infer", "connect 0.5"]
    assert loop_a.reconnect_attempts == 2 and loop_a.reconnects == 0


def test_a_server_that_answers_a_brief_check_again_gets_the_full_reconnect_timeout_next_time():
    client = Scripted([{"ok": 1}, ConnectionLost("again"), {"ok": 2}], connects=[{}, {}])
    watch = ServerWatch(gone=ServerUnavailable("earlier"))
    loop, _, _ = _loop(client, attempts=1, watch=watch, recheck_timeout_s=0.5)
    assert loop.call(lambda c: c.infer({})).value == {"ok": 1}  # never connected: one brief check, answered
    assert watch.gone is None
    assert loop.call(lambda c: c.infer({})).value == {"ok": 2}
    assert client.log == ["connect 0.5", "infer", "infer", "connect 7", "infer"]


def test_a_reconnect_to_a_server_with_other_metadata_gives_up_naming_only_what_changed():
    before = {"model": "pi05_droid", "action_horizon": 10, "norm": np.array([1.0, 2.0])}
    after = {"model": "pi0_droid", "action_horizon": 10, "norm": np.array([1.0, 2.0])}
    client = Scripted([ConnectionLost("dropped")], connects=[before, after])
    loop, _, _ = _loop(client, attempts=3)
    loop.connect()
    with pytest.raises(ConnectionGaveUp) as info:
        loop.call(lambda c: c.infer({}))
    assert isinstance(info.value.reconnect_error, ServerChanged)
    assert "'model': 'pi05_droid' -> 'pi0_droid'" in str(info.value)
    assert "action_horizon" not in str(info.value) and "norm" not in str(info.value)
    assert not client.connected and client.log[-1] == "close"  # never infer against it
    assert loop.watch.gone is None  # a server answered: later reconnects still wait for one


def test_a_reconnect_to_the_same_server_passes_and_identity_none_compares_nothing():
    same = {"model": "pi05_droid", "norm": np.array([1.0, 2.0])}
    client = Scripted([ConnectionLost("dropped"), {"ok": 1}], connects=[same, {**same, "norm": np.array([1.0, 2.0])}])
    loop, _, _ = _loop(client)
    loop.connect()
    assert loop.call(lambda c: c.infer({})).value == {"ok": 1} and loop.reconnects == 1
    other = Scripted([ConnectionLost("dropped"), {"ok": 2}], connects=[{"a": 1}, {"a": 2}])
    blind, _, _ = _loop(other, identity=None)
    blind.connect()
    assert blind.call(lambda c: c.infer({})).value == {"ok": 2}


def test_back_off_doubles_to_two_seconds():
    assert [backoff_s(a) for a in range(1, 7)] == [0.2, 0.4, 0.8, 1.6, 2.0, 2.0]


def test_openpis_client_implements_the_interface():
    # GR00T's and DreamZero's clients are checked in their plugins' wire tests
    client = PolicyClient("127.0.0.1", 1)
    assert isinstance(client, WireClient) and not client.connected
    client.close()
    client.close()  # idempotent
