"""How the Ray backend decides its cluster's head is lost (no Ray needed: the probe is a TCP
connect to the head's GCS address)."""

from __future__ import annotations

import socket

from arena_ray.backend import RayBackend
from arena_ray.options import RayOptions


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the block ends: nothing listens there


def test_a_head_that_stops_answering_is_lost_after_head_timeout_s_and_at_once_when_a_task_ended_with_it(monkeypatch):
    backend = RayBackend(RayOptions(address="auto", head_timeout_s=30))
    backend._gcs = f"127.0.0.1:{_closed_port()}"
    now = [1000.0]
    monkeypatch.setattr("arena_ray.backend.time.monotonic", lambda: now[0])
    assert backend._head_lost(task_failed=False) is None  # unreachable since now: not yet lost
    now[0] += 29
    assert backend._head_lost(task_failed=False) is None
    now[0] += 1
    reason = backend._head_lost(task_failed=False)
    assert reason is not None and backend._gcs in reason and "lost" in reason and "--resume" in reason
    fresh = RayBackend(RayOptions(address="auto"))
    fresh._gcs = backend._gcs
    assert fresh._head_lost(task_failed=True) is not None  # a task ended as the head went quiet


def test_a_head_that_answers_again_resets_the_count():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        backend = RayBackend(RayOptions(address="auto", head_timeout_s=0.001))
        backend._gcs = f"127.0.0.1:{server.getsockname()[1]}"
        backend._unreachable_since = 0.0  # it had stopped answering long ago
        assert backend._head_lost(task_failed=True) is None
        assert backend._unreachable_since is None
