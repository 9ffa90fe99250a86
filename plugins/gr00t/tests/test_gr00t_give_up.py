"""A dead GR00T server becomes error episodes in seconds, not first_request_timeout_s per retry.

A ZeroMQ REQ socket never says its server died, so the client checks that the port still
listens while it waits; the server here is a real process (``python -m arena_gr00t.testing``)
killed with SIGKILL mid-run.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem
from arena.testing.doubles import ServerProcess
from arena.testing.droid import DroidFakeEnv
from arena_gr00t.client import _LIVENESS_INTERVAL_S
from arena_gr00t.policy import Gr00tRemoteConfig, Gr00tRemotePolicy
from arena_gr00t.testing import Gr00tDouble

pytestmark = pytest.mark.slow

FIRST_REQUEST_S = 900.0
LIMIT_S = 90.0


def test_a_gr00t_server_killed_mid_run_is_an_error_episode_within_the_documented_bound():
    with ServerProcess("arena_gr00t.testing", "--infer-delay-s", "0.3") as server:
        config = Gr00tRemoteConfig(
            remote_host="127.0.0.1", remote_port=server.port, connect_timeout_s=30,
            first_request_timeout_s=FIRST_REQUEST_S, request_timeout_s=FIRST_REQUEST_S,
            reconnect_timeout_s=3, max_reconnect_attempts=3, open_loop_horizon=1,
        )
        policy = Gr00tRemotePolicy(config)
        records: list[Any] = []
        marks: dict[str, float] = {}

        def on_end(record: Any) -> None:
            records.append(record)
            if record.outcome == "error":
                marks.setdefault("error", time.monotonic())

        def run() -> None:
            limit = SimpleNamespace(max_episode_steps=1000, terminate_on_success=True)
            try:
                rollout(DroidFakeEnv(2), policy, [WorkItem("r", i, i) for i in range(2)], limit,
                        on_episode_end=on_end, max_consecutive_errors=None)
            finally:
                policy.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        time.sleep(2.5)  # several batched requests (0.3 s each) went through
        assert not records
        marks["kill"] = time.monotonic()
        server.kill()
        thread.join(LIMIT_S)
    assert not thread.is_alive(), "the GR00T client was still waiting long after its server died"
    waited = marks["error"] - marks["kill"]
    # documented: the port is checked every _LIVENESS_INTERVAL_S, then reconnect_timeout_s
    assert waited < _LIVENESS_INTERVAL_S + 1 + 3 + 10, f"{waited:.1f} s from the kill to the error episode"
    assert sorted(r.env_id for r in records) == [0, 1]
    assert all(r.outcome == "error" and "did not answer again within 3 s" in r.error for r in records), records[0].error
    assert all(f"env {r.env_id}:" in r.error for r in records)


def test_a_gr00t_server_hung_after_its_warm_up_is_an_error_within_the_request_and_reconnect_timeouts():
    # Request 1 is answered (the server is warm), then the server hangs for good while its
    # port stays open: no retry may wait first_request_timeout_s for it.
    env = DroidFakeEnv(1)
    with Gr00tDouble(hang_from_request=2) as server:
        config = Gr00tRemoteConfig(
            remote_host="127.0.0.1", remote_port=server.port, connect_timeout_s=10, open_loop_horizon=1,
            first_request_timeout_s=FIRST_REQUEST_S, request_timeout_s=1, reconnect_timeout_s=3,
        )
        policy = Gr00tRemotePolicy(config)
        policy.start(env)
        policy.set_task_description(env.task_description)
        obs = env.reset_envs([0], [0])
        policy.reset([0])
        policy.get_action(env, obs)
        box: dict[str, Any] = {}

        def step() -> None:
            try:
                policy.get_action(env, obs)
            except Exception as exc:  # noqa: BLE001 - handed to the test
                box["error"] = exc

        thread = threading.Thread(target=step, daemon=True)
        started = time.monotonic()
        thread.start()
        thread.join(LIMIT_S)
        elapsed = time.monotonic() - started
        policy.close()
    assert not thread.is_alive(), "a retry against a warm server waited first_request_timeout_s"
    assert "no reply to 'get_action' within 1 s" in str(box["error"])
    assert "did not answer again within 3 s" in str(box["error"])
    assert elapsed < 1 + 3 + 10
