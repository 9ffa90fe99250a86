"""How long a fault takes to become an error episode, against real server processes.

The long ``first_request_timeout_s`` belongs to the first inference after a server (re)start;
a server that died costs ``reconnect_timeout_s``, a hung one ``request_timeout_s`` per
attempt (``RemotePolicyConfig.give_up_bound_s``). The timeouts below are set so that waiting
the first-request timeout anywhere it does not belong would blow the test's generous limit.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from arena.errors import PolicyError
from arena.policies.adapters import EmbodimentAdapter
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig
from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem
from arena.testing.doubles import ServerProcess

pytestmark = pytest.mark.slow

#: Seconds a test waits before calling the client stuck (far below FIRST_REQUEST_S).
LIMIT_S = 90.0
FIRST_REQUEST_S = 900.0


class _StateAdapter(EmbodimentAdapter):
    action_dim: ClassVar[int] = 3

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        return observation["policy"]["state"][env_id]

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        return {"observation/state": np.asarray(extracted, np.float32), "prompt": instruction or ""}


class _Policy(RemoteChunkReplayPolicy):
    name = "give_up_remote"


class _Env:
    """Episodes of 1000 steps that never succeed: only a fault ends them."""

    task_description = "hold"
    success_key = "success"

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs

    def _obs(self) -> dict[str, Any]:
        return {"policy": {"state": np.zeros((self.num_envs, 3), np.float32)}}

    def reset_envs(self, ids, seeds):
        return self._obs()

    def step(self, actions):
        n = self.num_envs
        return self._obs(), np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), {"success": np.zeros(n, bool)}


def _policy(port: int, **config: Any) -> _Policy:
    fields = {
        "remote_host": "127.0.0.1",
        "remote_port": port,
        "embodiment": "state",
        "connect_timeout_s": FIRST_REQUEST_S,
        "first_request_timeout_s": FIRST_REQUEST_S,
        "request_timeout_s": FIRST_REQUEST_S,
        **config,
    }
    return _Policy(RemotePolicyConfig(**fields), adapter=_StateAdapter())


def _in_thread(fn) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def test_a_server_killed_mid_run_is_an_error_episode_for_every_env_within_the_reconnect_timeout():
    with ServerProcess("arena", "--action-shape", "4", "3", "--delay-s", "0.2") as server:
        policy = _policy(server.port, reconnect_timeout_s=3, max_reconnect_attempts=3, open_loop_horizon=1)
        records: list[Any] = []
        first_error = threading.Event()
        marks: dict[str, float] = {}

        def on_end(record: Any) -> None:
            records.append(record)
            if record.outcome == "error" and not first_error.is_set():
                marks["error"] = time.monotonic()
                first_error.set()

        def run() -> Any:
            try:
                limit = SimpleNamespace(max_episode_steps=1000, terminate_on_success=True)
                items = [WorkItem("r", i, i) for i in range(4)]
                return rollout(_Env(2), policy, items, limit, on_episode_end=on_end, max_consecutive_errors=None)
            finally:
                policy.close()

        thread, box = _in_thread(run)
        time.sleep(2.0)  # a few steps (0.2 s each) went through
        assert not records, "the episodes ended before the server was killed"
        marks["kill"] = time.monotonic()
        server.kill()
        thread.join(LIMIT_S)
    assert not thread.is_alive(), "the client was still waiting long after the server died"
    assert "error" not in box, box.get("error")
    waited = marks["error"] - marks["kill"]
    # documented: the kernel closes a dead server's sockets at once, then reconnect_timeout_s
    assert waited < 3 + 2 + 10, f"{waited:.1f} s from the kill to the first error episode"
    assert {r.env_id for r in records if r.outcome == "error"} == {0, 1}, [(r.env_id, r.episode_index, r.error) for r in records]
    assert all("reconnect failed" in r.error for r in records if r.outcome == "error"), records[0].error


def _hang_on_the_third_request(inline_below_ms: int, reconnect_timeout_s: float):
    """Requests 1 and 2 are answered (the server is warm), then the model hangs for good while
    its process stays up. Returns ``(policy, thread, box, elapsed_s)`` of the third request
    (``request_timeout_s`` 1, two reconnect attempts)."""
    with ServerProcess(
        "arena", "--action-shape", "4", "3", "--hang-from-request", "3", "--inline-below-ms", str(inline_below_ms)
    ) as server:
        policy = _policy(server.port, request_timeout_s=1, reconnect_timeout_s=reconnect_timeout_s,
                         max_reconnect_attempts=2, open_loop_horizon=1)
        env = _Env(1)
        obs = env.reset_envs([0], [0])
        policy.start(env)
        try:
            policy.get_action(env, obs)
            policy.get_action(env, obs)
            started = time.monotonic()
            thread, box = _in_thread(lambda: policy.get_action(env, obs))
            thread.join(LIMIT_S)
            return policy, thread, box, time.monotonic() - started
        finally:
            policy.close()


def test_a_hung_server_that_stays_up_costs_the_request_timeout_per_attempt_not_the_first_request_timeout():
    # Inference off the event loop (inline 0): the server still answers handshakes, so each
    # reconnect reaches the same, warm server. A model hung *inline* is the next test.
    policy, thread, box, elapsed = _hang_on_the_third_request(inline_below_ms=0, reconnect_timeout_s=10)
    assert not thread.is_alive(), "a reconnect to a warm server waited the first-request timeout"
    assert isinstance(box.get("error"), PolicyError), box
    assert "no reply within 1 s" in str(box["error"])
    # documented bound: (1 + max_reconnect_attempts) x request_timeout_s + back-offs (<= 2 s each)
    assert elapsed < 3 * 1 + 2 * 2 + 10
    assert policy.reconnects == 2


def test_a_model_hung_on_the_event_loop_is_reported_as_a_blocked_loop_within_the_reconnect_bound():
    # Short inferences run inline (on the event loop); when one of them hangs, the loop is
    # blocked: handshakes time out, and the client says so instead of waiting for a reply.
    policy, thread, box, elapsed = _hang_on_the_third_request(inline_below_ms=100, reconnect_timeout_s=3)
    assert not thread.is_alive(), "the client kept waiting on a server whose event loop is blocked"
    assert isinstance(box.get("error"), PolicyError), box
    assert "event loop blocked" in str(box["error"]), box["error"]
    # documented bound: request_timeout_s + max_reconnect_attempts x reconnect_timeout_s + back-offs
    assert elapsed < 1 + 2 * 3 + 2 * 2 + 5
    assert policy.reconnects == 0  # no handshake completed


def _warm_policy_of_a_killed_server() -> tuple[_Policy, _Env, Any, int]:
    """A policy that got one chunk from a server now killed: ``(policy, env, obs, port)``.
    Its request timeout (1 s) is shorter than the 3 s warm-up of the server that follows."""
    with ServerProcess("arena", "--action-shape", "4", "3") as first:
        policy = _policy(first.port, request_timeout_s=1, first_request_timeout_s=60, reconnect_timeout_s=30, open_loop_horizon=1)
        env = _Env(1)
        obs = env.reset_envs([0], [0])
        policy.start(env)
        policy.get_action(env, obs)
        first.kill()
    return policy, env, obs, first.port


def test_a_restarted_server_gets_the_first_request_timeout_for_its_warm_up():
    # Only a client that noticed the restart (connections refused meanwhile) waits for it.
    policy, env, obs, port = _warm_policy_of_a_killed_server()
    thread, box = _in_thread(lambda: policy.get_action(env, obs))
    time.sleep(1.0)  # the client finds the port refusing connections
    # Started from this thread: a child's parent-death signal follows the thread that spawned it.
    with ServerProcess("arena", "--action-shape", "4", "3", "--first-delay-s", "3", port=port):
        thread.join(LIMIT_S)
        policy.close()
    assert not thread.is_alive()
    assert "error" not in box, box.get("error")
    assert box["result"].shape == (1, 3)
    assert policy.reconnects == 1


def test_a_server_that_died_and_came_back_between_two_requests_gets_its_warm_up():
    # The client was idle while the server was killed and restarted: the next request finds
    # its connection dropped without a close frame (the process died), so the new server's
    # first inference (3 s, longer than request_timeout_s) gets first_request_timeout_s.
    policy, env, obs, port = _warm_policy_of_a_killed_server()
    try:
        with ServerProcess("arena", "--action-shape", "4", "3", "--first-delay-s", "3", port=port):
            actions = policy.get_action(env, obs)
    finally:
        policy.close()
    assert actions.shape == (1, 3) and policy.reconnects == 1


def test_the_give_up_bound_is_documented_from_the_config():
    config = RemotePolicyConfig(
        embodiment="x", first_request_timeout_s=600, reconnect_timeout_s=120, max_reconnect_attempts=3
    )
    assert config.give_up_bound_s() == 600 + 3 * (2 + 120 + 600)
