"""RemoteChunkReplayPolicy against a real policy server (the generic openpi double)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from arena.errors import PolicyError
from arena.policies.adapters import EmbodimentAdapter
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig


class CounterAdapter(EmbodimentAdapter):
    action_dim: ClassVar[int] = 3

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        return observation["policy"]["state"][env_id]

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        return {"observation/state": np.asarray(extracted, dtype=np.float64), "prompt": instruction or ""}


class CounterPolicy(RemoteChunkReplayPolicy):
    name = "counter_remote"


def chunk_reply(rows: int = 4, dtype=np.float64):
    """Each chunk row r is [state0, request_number, r]: tests can tell chunks apart."""
    counter = {"n": 0}

    def reply(obs: dict[str, Any]) -> dict[str, Any]:
        counter["n"] += 1
        state = float(obs["observation/state"][0])
        actions = np.array([[state, counter["n"], r] for r in range(rows)], dtype=dtype)
        return {"actions": actions}

    return reply


def make_policy(port: int, num_envs: int, horizon: int = 2, **config: Any) -> tuple[CounterPolicy, Any, dict]:
    cfg = RemotePolicyConfig(
        remote_host="127.0.0.1",
        remote_port=port,
        embodiment="counter",
        open_loop_horizon=horizon,
        connect_timeout_s=config.pop("connect_timeout_s", 5),
        request_timeout_s=config.pop("request_timeout_s", 5),
        first_request_timeout_s=config.pop("first_request_timeout_s", 5),
        **config,
    )
    policy = CounterPolicy(cfg, adapter=CounterAdapter())
    env = SimpleNamespace(num_envs=num_envs)
    obs = {"policy": {"state": np.arange(num_envs, dtype=np.float64)[:, None].repeat(2, axis=1)}}
    policy.start(env)
    policy.set_task_description("count")
    return policy, env, obs


def test_chunk_rows_are_replayed_then_requested_again(openpi_double):
    double = openpi_double(chunk_reply())
    policy, env, obs = make_policy(double.port, num_envs=1, horizon=2)
    try:
        first = policy.get_action(env, obs)
        second = policy.get_action(env, obs)
        third = policy.get_action(env, obs)
    finally:
        policy.close()
    assert first.dtype == np.float64 and first.shape == (1, 3)
    assert first[0].tolist() == [0, 1, 0] and second[0].tolist() == [0, 1, 1]
    assert third[0].tolist() == [0, 2, 0]
    assert len(double.model.requests) == 2
    assert double.model.requests[0]["prompt"] == "count"


def test_envs_due_on_the_same_step_each_get_one_request(openpi_double):
    double = openpi_double(chunk_reply())
    policy, env, obs = make_policy(double.port, num_envs=3, horizon=2)
    try:
        actions = policy.get_action(env, obs)
        assert len(double.model.requests) == 3
        policy.get_action(env, obs)
        assert len(double.model.requests) == 3
    finally:
        policy.close()
    assert sorted(actions[:, 0].tolist()) == [0, 1, 2]


def test_reset_discards_only_the_given_envs_chunks(openpi_double):
    double = openpi_double(chunk_reply())
    policy, env, obs = make_policy(double.port, num_envs=3, horizon=3)
    try:
        policy.get_action(env, obs)
        policy.reset(env_ids=[0, 2])
        policy.get_action(env, obs)
    finally:
        policy.close()
    states = [float(r["observation/state"][0]) for r in double.model.requests[3:]]
    assert sorted(states) == [0.0, 2.0]


def test_reconnect_discards_cached_chunks(openpi_double):
    double = openpi_double(chunk_reply(), fail_on_request=3)
    policy, env, obs = make_policy(double.port, num_envs=2, horizon=4)
    try:
        policy.get_action(env, obs)  # requests 1 and 2
        policy.reset(env_ids=[0])
        policy.get_action(env, obs)  # env 0: request 3 fails (1011), reconnect, retry
        assert policy.reconnects == 1
        # after the reconnect env 1's cached chunk was discarded too: both envs refetched
        states = sorted(float(r["observation/state"][0]) for r in double.model.requests[3:])
        assert states == [0.0, 1.0]
    finally:
        policy.close()


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ({"actions": np.zeros((4, 5))}, "expected (H, 3)"),
        ({"actions": np.full((4, 3), np.nan)}, "NaN"),
        ({"actions": np.array([["a", "b", "c"]])}, "dtype"),
        ({"action": np.zeros((4, 3))}, "no 'actions'"),
    ],
)
def test_protocol_violations_are_errors_naming_the_key(openpi_double, reply, needle):
    double = openpi_double(lambda obs: reply)
    policy, env, obs = make_policy(double.port, num_envs=2)
    try:
        with pytest.raises(PolicyError) as info:
            policy.get_action(env, obs)
    finally:
        policy.close()
    assert sorted(info.value.env_ids) == [0, 1]
    assert needle in str(info.value)
    assert "'actions'" in str(info.value) or "no 'actions'" in str(info.value)


def test_float64_actions_reach_the_env_unrounded(openpi_double):
    """openpi's clients hand the simulator ``action.tolist()``: float64, not rounded to float32."""
    value = 0.1  # not a float32 value
    double = openpi_double(lambda request: {"actions": np.full((4, 3), value, np.float64)})
    policy, env, obs = make_policy(double.port, num_envs=1)
    try:
        actions = policy.get_action(env, obs)
    finally:
        policy.close()
    assert actions.dtype == np.float64 and actions[0].tolist() == [value] * 3


def test_unreachable_server_is_a_policy_error_not_a_hang():
    from arena.launch.server_process import free_port

    port = free_port()
    cfg = RemotePolicyConfig(remote_port=port, embodiment="counter", connect_timeout_s=1)
    policy = CounterPolicy(cfg, adapter=CounterAdapter())
    with pytest.raises(PolicyError, match="cannot connect"):
        policy.start(SimpleNamespace(num_envs=2))
    policy.close()


def test_close_is_idempotent_and_leaves_the_server_running(openpi_double):
    double = openpi_double(chunk_reply())
    policy, env, obs = make_policy(double.port, num_envs=1)
    policy.get_action(env, obs)
    policy.close()
    policy.close()
    again, env, obs = make_policy(double.port, num_envs=1)
    try:
        assert again.get_action(env, obs).shape == (1, 3)
    finally:
        again.close()


def test_latency_stats_reach_the_episode_record(openpi_double):
    double = openpi_double(chunk_reply())
    policy, env, obs = make_policy(double.port, num_envs=1, horizon=1)
    try:
        for _ in range(3):
            policy.get_action(env, obs)
        info = policy.episode_info(0)
    finally:
        policy.close()
    assert info["latency"]["requests"] == 3
    assert info["server_timing"]["infer_ms_mean"] >= 0


def test_arena_adapter_aliases_are_accepted():
    cfg = RemotePolicyConfig.model_validate({"openpi_embodiment_adapter": "droid"})
    assert cfg.embodiment == "droid"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ">f8"])
def test_any_float_dtype_is_accepted_and_widened_to_float64(openpi_double, dtype):
    double = openpi_double(chunk_reply(dtype=dtype))
    policy, env, obs = make_policy(double.port, num_envs=1)
    try:
        actions = policy.get_action(env, obs)
    finally:
        policy.close()
    assert actions.dtype == np.float64 and actions[0].tolist() == [0.0, 1.0, 0.0]


class _TinyEnv:
    """A synthetic env: episodes of 3 steps, success when the action's first column is >= 0."""

    success_key = "success"

    default_max_episode_steps = 3
    task_description = "count"

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs

    def _obs(self):
        return {"policy": {"state": np.zeros((self.num_envs, 2))}}

    def reset_envs(self, ids, seeds):
        return self._obs()

    def step(self, actions):
        n = self.num_envs
        return self._obs(), np.zeros(n), np.zeros(n, bool), np.zeros(n, bool), {"success": actions[:, 0] >= 0}


def _rollout_records(port: int, num_envs: int) -> list[Any]:
    """The records of ``num_envs`` episodes of ``_TinyEnv`` against the server on ``port``."""
    from arena.rollout.rollout import rollout
    from arena.rollout.workitems import WorkItem

    cfg = RemotePolicyConfig(remote_port=port, embodiment="counter", connect_timeout_s=5,
                             request_timeout_s=5, first_request_timeout_s=5)
    policy = CounterPolicy(cfg, adapter=CounterAdapter())
    records: list[Any] = []
    items = [WorkItem(run="r", episode_index=i, seed=i) for i in range(num_envs)]
    try:
        rollout(_TinyEnv(num_envs), policy, items, None, on_episode_end=records.append, max_consecutive_errors=None)
    finally:
        policy.close()
    return records


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        ({"actions": np.zeros((4, 5))}, "shape (4, 5)"),
        ({"actions": np.array([["a", "b", "c"]])}, "dtype <U1"),
        ({"actions": np.full((4, 3), np.nan)}, "NaN"),
    ],
)
def test_bad_replies_end_episodes_as_errors_naming_key_and_expected_shape(openpi_double, reply, needle):
    double = openpi_double(lambda obs: reply)
    records = _rollout_records(double.port, num_envs=2)
    assert [r.outcome for r in records] == ["error", "error"], records
    for record in records:
        assert needle in record.error and "'actions'" in record.error
        assert "(H, 3)" in record.error, record.error
    assert len(double.model.requests) == 2  # a protocol violation is not retried


def test_one_fault_reaching_several_envs_names_each_env_in_its_own_record(openpi_double):
    double = openpi_double(lambda obs: {"actions": np.zeros((4, 5))})  # wrong width for every env
    records = _rollout_records(double.port, num_envs=3)
    assert sorted(r.env_id for r in records) == [0, 1, 2]
    for record in records:
        assert record.outcome == "error"
        assert f"env {record.env_id}: protocol violation" in record.error, record.error
        others = {0, 1, 2} - {record.env_id}
        assert not any(f"env {e}:" in record.error for e in others), record.error


def test_requests_of_envs_due_together_are_batched_by_the_server(policy_server):
    from arena.testing.doubles import ChunkModel

    class Counting(ChunkModel):
        sizes: list[int] = []

        def infer_batch(self, batch):
            self.sizes.append(len(batch))
            return super().infer_batch(batch)

    model = Counting((4, 3), cost_ms=30)
    from arena.transport import PolicyServer

    server = PolicyServer(model, "127.0.0.1", 0, max_batch_size=8, max_wait_ms=500).start_in_thread()
    try:
        policy, env, obs = make_policy(server.port, num_envs=4, horizon=1)
        try:
            started = __import__("time").monotonic()
            for _ in range(3):
                policy.get_action(env, obs)
            elapsed = __import__("time").monotonic() - started
        finally:
            policy.close()
    finally:
        server.stop()
    assert sum(model.sizes) == 12
    assert max(model.sizes) == 4  # all four envs in one infer_batch call
    assert elapsed < 3 * 0.5  # the batch closed once all four connections were waiting, not after max_wait_ms


def test_one_after_another_sends_requests_sequentially(openpi_double):
    double = openpi_double(chunk_reply(), max_batch_size=4, max_wait_ms=1)
    policy, env, obs = make_policy(double.port, num_envs=3, horizon=1, concurrent_requests=False)
    try:
        policy.get_action(env, obs)
    finally:
        policy.close()
    assert [float(r["observation/state"][0]) for r in double.model.requests] == [0.0, 1.0, 2.0]


class _ScriptedClient:
    """A stand-in PolicyClient: each ``infer`` takes the next outcome of a shared script."""

    script: ClassVar[list[bool]] = []  # True: reply with a chunk; False: the connection drops

    def __init__(self, host: str, port: int, **options: Any) -> None:
        self.endpoint = f"ws://{host}:{port}"
        self.connected = False
        self.saw_server_down = False

    def connect(self, timeout_s: float | None = None) -> dict:
        self.connected = True
        return {}

    def expect_warmup(self) -> None:
        pass

    def close(self) -> None:
        self.connected = False

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        from arena.transport.errors import ConnectionLost

        if not self.script.pop(0):
            self.connected = False
            raise ConnectionLost("dropped")
        return {"actions": np.full((2, 3), float(obs["observation/state"][0]))}


def test_chunks_fetched_in_the_last_allowed_round_are_used():
    # max_reconnect_attempts=1 allows three fetch rounds. Sequentially: round 1 env 0 gets a
    # chunk, env 1 drops and reconnects (discarding env 0's chunk) and gets one; round 2 env 0
    # drops and reconnects (discarding env 1's) and gets one; round 3 env 1 gets one: every
    # env has a chunk, so there is an action, not an error.
    class ScriptedPolicy(CounterPolicy):
        client_cls = _ScriptedClient

    _ScriptedClient.script = [True, False, True, False, True, True]
    cfg = RemotePolicyConfig(
        embodiment="counter", max_reconnect_attempts=1, concurrent_requests=False
    )
    policy = ScriptedPolicy(cfg, adapter=CounterAdapter())
    env = SimpleNamespace(num_envs=2)
    obs = {"policy": {"state": np.array([[0.0], [1.0]])}}
    policy.start(env)
    try:
        actions = policy.get_action(env, obs)
    finally:
        policy.close()
    assert actions[:, 0].tolist() == [0.0, 1.0]
    assert policy.reconnects == 2 and _ScriptedClient.script == []

