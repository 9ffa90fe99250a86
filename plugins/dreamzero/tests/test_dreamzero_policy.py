"""``dreamzero_remote`` against the DreamZero double: sessions, frame schedule, faults, config."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.launch.planning import plan_servers
from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem

from arena_dreamzero.policy import DreamZeroRemoteConfig, DreamZeroRemotePolicy
from arena_dreamzero.testing import DreamZeroDouble
from arena.testing.droid import DroidFakeEnv


def make_policy(port: int, **fields) -> DreamZeroRemotePolicy:
    fields = {"remote_host": "127.0.0.1", "remote_port": port, "connect_timeout_s": 5, "reconnect_timeout_s": 2,
              "request_timeout_s": 2, "first_request_timeout_s": 2, **fields}
    return DreamZeroRemotePolicy(DreamZeroRemoteConfig(**fields))


def run_items(policy, n: int, steps: int, **kw):
    env = DroidFakeEnv(1)
    records = []
    summary = rollout(
        env, policy, [WorkItem("r", i, i) for i in range(n)], SimpleNamespace(max_episode_steps=steps, terminate_on_success=True),
        on_episode_end=records.append, **kw,
    )
    return summary, records, env


def test_each_episode_is_a_new_session_with_one_frame_first_then_four():
    with DreamZeroDouble() as server:
        policy = make_policy(server.port, open_loop_horizon=8)
        summary, records, env = run_items(policy, 2, steps=20)
        policy.close()
    assert summary.counts["timeout"] == 2
    # 20 steps / 8 rows = 3 requests per episode
    per_session = {}
    for call in server.calls:
        per_session.setdefault(call.session_id, []).append((call.frames_received, call.frames_used))
    assert list(per_session.values()) == [[(1, 1), (4, 4), (4, 4)]] * 2
    assert [r.policy_extras["dreamzero"]["session_id"] for r in records] == list(per_session)
    assert server.resets >= 2  # an explicit reset per episode (and one on close)
    assert all(c.prompt == env.task_description for c in server.calls)


def test_actions_replay_24_rows_then_request_again():
    with DreamZeroDouble() as server:
        policy = make_policy(server.port)
        run_items(policy, 1, steps=30)
        policy.close()
    assert len(server.calls) == 2  # rows 0-23 of the first chunk, then 6 of the second


def test_single_frame_mode_sends_one_frame_per_request():
    with DreamZeroDouble() as server:
        policy = make_policy(server.port, open_loop_horizon=4, frame_offsets=[0])
        run_items(policy, 1, steps=12)
        policy.close()
    assert [c.frames_received for c in server.calls] == [1, 1, 1]


def test_server_restart_mid_episode_reconnects_with_a_new_session_and_loses_nothing():
    with DreamZeroDouble(restart_on_request=2) as server:
        # the double's restart (close, listen again) and the reconnect take seconds on a loaded
        # 2-core machine: room enough that only a lost episode fails this test, not the load
        policy = make_policy(server.port, open_loop_horizon=4, reconnect_timeout_s=15, request_timeout_s=15,
                             first_request_timeout_s=15)
        summary, records, _ = run_items(policy, 2, steps=10)
        policy.close()
    assert summary.counts["error"] == 0 and sorted(r.episode_index for r in records) == [0, 1]
    assert server.restarts == 1 and policy.reconnects == 1
    first_episode = [c for c in server.calls if c.session_id in {server.calls[0].session_id}]
    assert len(first_episode) == 1  # the session of the first request was abandoned at the restart
    assert server.calls[1].new_session and server.calls[1].frames_received == 1


def test_a_server_that_never_replies_ends_the_episode_as_error_and_records_it():
    with DreamZeroDouble(never_reply=True) as server:
        policy = make_policy(server.port, request_timeout_s=0.3, first_request_timeout_s=0.3, max_reconnect_attempts=1)
        summary, records, _ = run_items(policy, 2, steps=5, max_consecutive_errors=None)
        policy.close()
    assert [r.outcome for r in records] == ["error", "error"]
    assert "RequestTimeout" in records[0].error


def test_a_server_traceback_is_an_error_episode_and_the_next_one_reconnects():
    with DreamZeroDouble(fail_on_request=1) as server:
        policy = make_policy(server.port, open_loop_horizon=4)
        summary, records, _ = run_items(policy, 2, steps=4)
        policy.close()
    assert [r.outcome for r in records] == ["error", "timeout"]
    assert "injected failure" in records[0].error and server.connections == 2


def _experiment(num_envs: int, **policy):
    return {
        "runs": {
            "dz": {
                "environment": {"type": "franka_kitchen", "task": "microwave"},
                "policy": {"type": "dreamzero_remote", **policy},
                "environment_builder": {"num_envs": num_envs},
            }
        }
    }


def test_more_than_one_env_is_refused_at_validation_with_the_way_to_scale():
    with pytest.raises(ConfigError, match="run 'dz'.*scale with more runs or shards"):
        load_experiment_dict(_experiment(4))


def test_server_task_is_torchrun_on_an_h100_and_never_shared():
    exp = load_experiment_dict(_experiment(1, model_path="/ckpt/dz", server_gpus=2, dreamzero_embodiment_adapter="droid"))
    task = plan_servers(exp)["dz"].task
    assert not task.shareable and task.resources.gpu_type == "H100" and task.resources.gpu == 2
    assert task.readiness == "websocket" and task.port == 5000
    script = task.render(task.command, host="0.0.0.0", port=5123)[-1]
    assert "torch.distributed.run --standalone --nproc_per_node=2 socket_test_optimized_AR.py --port 5123" in script
    assert "--model-path /ckpt/dz" in script


def test_defaults_wait_long_for_the_first_connection():
    config = DreamZeroRemoteConfig()
    assert config.connect_timeout_s >= 1800 and config.open_loop_horizon == 24
    assert config.reconnect_timeout_s < config.connect_timeout_s


def test_first_inference_after_the_episode_reset_gets_the_warm_up_timeout():
    # The rollout resets (``reset`` endpoint) before the first infer; that quick acknowledgement
    # must not use up first_request_timeout_s, or a real warm-up times out and reconnects.
    with DreamZeroDouble(first_delay_s=1.0) as server:
        policy = make_policy(server.port, request_timeout_s=0.3, first_request_timeout_s=5, open_loop_horizon=4)
        summary, records, _ = run_items(policy, 1, steps=6)
        policy.close()
    assert [r.outcome for r in records] == ["timeout"]
    assert policy.reconnects == 0 and server.connections == 1


@pytest.mark.slow
def test_a_server_hung_after_its_warm_up_costs_the_request_timeout_per_retry_not_the_warm_up_timeout():
    import threading
    import time

    with DreamZeroDouble(hang_from_request=2) as server:
        policy = make_policy(server.port, open_loop_horizon=1, request_timeout_s=0.5, first_request_timeout_s=900,
                             reconnect_timeout_s=3, max_reconnect_attempts=2)
        box = {}

        def run():
            box["out"] = run_items(policy, 1, steps=5, max_consecutive_errors=None)

        started = time.monotonic()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(90)
        elapsed = time.monotonic() - started
        policy.close()
    assert not thread.is_alive(), "a reconnect to a server that stayed up waited first_request_timeout_s"
    _, records, _ = box["out"]
    assert [r.outcome for r in records] == ["error"] and "no reply within 0.5 s" in records[0].error
    assert records[0].error.startswith("PolicyError: env 0: DreamZero server: RequestTimeout")
    assert policy.reconnects == 2 and elapsed < 3 * 0.5 + 2 * 2 + 10


@pytest.mark.slow
def test_a_dreamzero_server_that_is_gone_ends_the_episode_after_one_reconnect_timeout():
    import time

    server = DreamZeroDouble().start()
    policy = make_policy(server.port, open_loop_horizon=1, request_timeout_s=900, first_request_timeout_s=900,
                         reconnect_timeout_s=2, max_reconnect_attempts=3)
    env = DroidFakeEnv(1)
    policy.start(env)
    obs = env.reset_envs([0], [0])
    policy.reset([0])
    policy.get_action(env, obs)
    server.stop()
    started = time.monotonic()
    with pytest.raises(Exception, match="reconnect failed.*within 2 s"):
        policy.get_action(env, obs)
    assert time.monotonic() - started < 2 + 2 + 10
    policy.close()
