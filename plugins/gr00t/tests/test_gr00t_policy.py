"""``gr00t_remote`` against the GR00T double: batching, schedulers, faults, config, server task."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError, PolicyError
from arena.launch.planning import plan_servers
from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem

from arena_gr00t.policy import Gr00tRemoteConfig, Gr00tRemotePolicy
from arena_gr00t.servertask import gr00t_server_task
from arena_gr00t.testing import Gr00tDouble
from arena.testing.droid import DroidFakeEnv


def make_policy(port: int, **fields) -> Gr00tRemotePolicy:
    fields = {"remote_host": "127.0.0.1", "remote_port": port, "connect_timeout_s": 5, "request_timeout_s": 2,
              "first_request_timeout_s": 2, "reconnect_timeout_s": 2, **fields}
    return Gr00tRemotePolicy(Gr00tRemoteConfig(**fields))


def run_items(env, policy, n: int, steps: int, **kw):
    records = []
    summary = rollout(
        env, policy, [WorkItem("r", i, i) for i in range(n)], SimpleNamespace(max_episode_steps=steps, terminate_on_success=True),
        on_episode_end=records.append, **kw,
    )
    return summary, records


@pytest.mark.parametrize("generation", ["n1.6", "n1.6-sim", "n1.5"])
def test_one_batched_request_serves_every_env(generation):
    env = DroidFakeEnv(3)
    with Gr00tDouble(generation=generation) as server:
        policy = make_policy(server.port, wire_generation=generation, open_loop_horizon=4)
        policy.start(env)
        policy.set_task_description(env.task_description)
        obs = env.reset_envs([0, 1, 2], [0, 1, 2])
        policy.reset([0, 1, 2])
        for _ in range(8):
            actions = policy.get_action(env, obs)
            assert actions.shape == (3, 8) and actions.dtype == np.float32
            obs, *_ = env.step(actions)
        policy.close()
    assert server.batches == [3, 3]  # 8 steps / 4 rows, one request for 3 envs each time
    gets = [r for r in server.requests if r["endpoint"] == "get_action"]
    if generation == "n1.6":
        assert set(gets[0]["data"]) == {"observation", "options"}
        assert gets[0]["data"]["observation"]["language"]["annotation.language.language_instruction"] == [[env.task_description]] * 3
    elif generation == "n1.6-sim":
        assert set(gets[0]["data"]) == {"observation", "options"}
        flat = gets[0]["data"]["observation"]
        assert flat["video.wrist_image_left"].shape[:2] == (3, 1) and flat["state.joint_position"].shape == (3, 1, 7)
        assert flat["annotation.language.language_instruction"] == [env.task_description] * 3
    else:
        assert "video.wrist_image_left" in gets[0]["data"]


@pytest.mark.parametrize(
    ("client", "message"),
    [("n1.6", "Video key 'video.exterior_image_1_left' must be in observation"), ("n1.5", "unexpected keyword argument")],
)
def test_a_sim_wrapper_server_refuses_the_other_wire_modes_as_the_real_one_does(client, message):
    env = DroidFakeEnv(2)
    with Gr00tDouble(generation="n1.6-sim") as server:
        policy = make_policy(server.port, wire_generation=client)
        summary, records = run_items(env, policy, 2, steps=3, max_consecutive_errors=None)
        policy.close()
    assert [r.outcome for r in records] == ["error", "error"]
    assert message in records[0].error


def test_the_sim_wrapper_accepts_the_legacy_coarse_action_key_for_task():
    from arena_gr00t.adapters import DROID_MODALITY
    from arena_gr00t.client import _LIVENESS_INTERVAL_S
    from arena_gr00t.codec import ModalityConfig

    from arena_gr00t.client import Gr00tClient

    modality = {**DROID_MODALITY, "language": ModalityConfig((0,), ("task",))}
    with Gr00tDouble(generation="n1.6-sim", modality=modality) as server:
        client = Gr00tClient("127.0.0.1", server.port, request_timeout_s=5)
        try:
            action, info = client.get_action(_flat_observation(2, "annotation.human.coarse_action"), generation="n1.6-sim")
        finally:
            client.close()
    assert set(action) == {"action.joint_position", "action.gripper_position"} and info == {}
    assert action["action.joint_position"].shape == (2, 32, 7)


def _flat_observation(batch: int, language_key: str) -> dict:
    return {
        "video.exterior_image_1_left": np.zeros((batch, 1, 180, 320, 3), np.uint8),
        "video.wrist_image_left": np.zeros((batch, 1, 180, 320, 3), np.uint8),
        "state.joint_position": np.zeros((batch, 1, 7), np.float32),
        "state.gripper_position": np.zeros((batch, 1, 1), np.float32),
        language_key: ["open the door"] * batch,
    }


def test_api_token_comes_from_the_variable_named_by_api_key_env(monkeypatch):
    monkeypatch.setenv("GR00T_TOKEN", "tok")
    env = DroidFakeEnv(1)
    with Gr00tDouble(api_token="tok") as server:
        policy = make_policy(server.port, api_key_env="GR00T_TOKEN")
        policy.start(env)
        policy.close()
    assert all(r.get("api_token") == "tok" for r in server.requests)


def test_synced_batch_is_selected_by_name_and_holds_reset_envs():
    env = DroidFakeEnv(2, short_seeds={1})  # env 1's first episode ends after 2 steps
    with Gr00tDouble() as server:
        policy = make_policy(server.port, scheduler="synced_batch", open_loop_horizon=4)
        summary, records = run_items(env, policy, 4, steps=6)
        policy.close()
    assert summary.counts["timeout"] == 4 and summary.counts["error"] == 0
    assert type(policy.scheduler).__name__ == "SyncedBatchScheduler"
    assert max((r.policy_extras or {}).get("gr00t", {}).get("held_steps", 0) for r in records) > 0
    assert set(server.batches) == {2}


def test_server_restart_mid_episode_loses_nothing():
    env = DroidFakeEnv(2)
    with Gr00tDouble(restart_on_request=2) as server:
        policy = make_policy(server.port, open_loop_horizon=4, request_timeout_s=0.5, first_request_timeout_s=0.5)
        summary, records = run_items(env, policy, 4, steps=10)
        policy.close()
    assert server.restarts == 1 and policy.reconnects >= 1
    assert sorted(r.episode_index for r in records) == [0, 1, 2, 3]
    assert summary.counts["error"] == 0 and summary.counts["timeout"] == 4


def test_a_server_that_never_replies_ends_episodes_as_errors_and_records_every_one():
    env = DroidFakeEnv(2)
    with Gr00tDouble(hang_from_request=1) as server:
        policy = make_policy(server.port, request_timeout_s=0.2, first_request_timeout_s=0.2, max_reconnect_attempts=1,
                             reconnect_timeout_s=0.5)
        summary, records = run_items(env, policy, 3, steps=5, max_consecutive_errors=None)
        policy.close()
    assert [r.outcome for r in records] == ["error"] * 3
    assert all("RequestTimeout" in r.error for r in records)
    assert sorted(r.episode_index for r in records) == [0, 1, 2]


def test_error_replies_are_error_episodes_not_retried():
    env = DroidFakeEnv(1)
    with Gr00tDouble(error_requests=[1]) as server:
        policy = make_policy(server.port, open_loop_horizon=4)
        summary, records = run_items(env, policy, 2, steps=4)
        policy.close()
    assert [r.outcome for r in records] == ["error", "timeout"]
    assert "injected failure" in records[0].error and server.get_action_count == 2


def test_start_fails_clearly_when_the_action_size_does_not_match():
    env = DroidFakeEnv(1)
    env.action_space = type(env.action_space)(-1, 1, shape=(9,))
    with Gr00tDouble() as server:
        policy = make_policy(server.port)
        with pytest.raises(PolicyError, match="8-dim actions; the environment takes 9"):
            policy.start(env)
        policy.close()


def _experiment(**policy):
    return {
        "runs": {
            "g": {
                "environment": {"type": "franka_kitchen", "task": "microwave"},
                "policy": {"type": "gr00t_remote", **policy},
            }
        }
    }


def test_scheduler_and_chunk_length_are_config_fields():
    run = load_experiment_dict(_experiment(scheduler="synced_batch", action_chunk_length=16)).runs["g"]
    assert run.policy.scheduler == "synced_batch" and run.policy.open_loop_horizon == 16
    with pytest.raises(ConfigError, match="scheduler"):
        load_experiment_dict(_experiment(scheduler="eager"))


def test_server_task_binds_where_the_backend_says_on_5555_with_one_gpu():
    exp = load_experiment_dict(_experiment(model_path="/ckpt/gr00t", embodiment_tag="OXE_DROID"))
    task = plan_servers(exp)["g"].task
    assert task.port == 5555 and task.readiness == "zmq-ping" and task.resources.gpu == 1
    argv = task.render(task.command, host="0.0.0.0", port=5555)
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert argv[argv.index("--model_path") + 1] == "/ckpt/gr00t"
    assert argv[argv.index("--embodiment_tag") + 1] == "OXE_DROID"
    assert "--use-sim-policy-wrapper" not in argv
    local = task.render(task.local_command, host="127.0.0.1", port=6000)
    assert local[local.index("--host") + 1] == "127.0.0.1" and local[-1] == "6000"
    assert gr00t_server_task(Gr00tRemoteConfig()).shareable
    assert task.api_key_args is None  # run_gr00t_server.py takes no api_token
    sim = gr00t_server_task(Gr00tRemoteConfig(wire_generation="n1.6-sim"))
    assert sim.command[-1] == "--use-sim-policy-wrapper"


def test_a_server_that_never_answers_ping_fails_start_within_connect_timeout():
    import time

    env = DroidFakeEnv(1)
    with Gr00tDouble(never_reply=True) as server:
        policy = make_policy(server.port, connect_timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(PolicyError, match="no answer to ping"):
            policy.start(env)
        assert time.monotonic() - started < 3
        policy.close()


def test_a_server_back_with_another_modality_config_ends_the_episodes_as_errors_naming_what_changed():
    from arena_gr00t.adapters import DROID_MODALITY
    from arena_gr00t.client import _LIVENESS_INTERVAL_S
    from arena_gr00t.codec import ModalityConfig

    env = DroidFakeEnv(2)
    with Gr00tDouble() as first:
        port = first.port
        policy = make_policy(port, open_loop_horizon=4, reconnect_timeout_s=10)
        policy.start(env)
        policy.set_task_description(env.task_description)
        obs = env.reset_envs([0, 1], [0, 1])
        policy.reset([0, 1])
        policy.get_action(env, obs)
    for _ in range(3):
        policy.get_action(env, obs)  # the rest of the chunk: no request
    # the next request finds the port closed and reconnects; meanwhile a model with a 16-step
    # action horizon (the first one had 32) starts on the same port
    box: dict = {}

    def request() -> None:
        try:
            policy.get_action(env, obs)
        except PolicyError as exc:
            box["error"] = exc

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    time.sleep(_LIVENESS_INTERVAL_S + 1.5)  # the client saw the port closed: a fault, a reconnect
    other = {**DROID_MODALITY, "action": ModalityConfig(tuple(range(16)), ("joint_position", "gripper_position"))}
    with Gr00tDouble(modality=other, port=port) as second:
        thread.join(30)
        policy.close()
    assert not thread.is_alive() and "error" in box, "the request went on against the other server"
    said = str(box["error"])
    assert "ServerChanged" in said and "'action'" in said and "'video'" not in said, said
    assert box["error"].env_ids == [0, 1]
    assert any(r["endpoint"] == "get_modality_config" for r in second.requests)
    assert not any(r["endpoint"] == "get_action" for r in second.requests)  # never asked for actions
