"""``vla_eval_remote`` in live mode against vla-eval 0.8.0's real server code: a server that
answers from its chunk buffer is refused (its replies are rows of older observations), and
with ``chunk_size: 1`` every executed action comes from the observation its request sent."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.live.config import ExecutionConfig
from arena.live.policy import LivePolicy

from arena_vla_eval.policy import VlaEvalRemoteConfig, VlaEvalRemotePolicy

pytestmark = pytest.mark.timeout(120)


def _run(server_args: dict[str, Any]) -> dict[str, Any]:
    return {"runs": {"live": {
        "environment": {"type": "metaworld", "task": "reach-v3"},
        "policy": {"type": "vla_eval_remote", "remote_port": 9, "server_args": server_args},
        "server": {"external": True},
        "execution": {"mode": "live", "delay": {"steps": 1}, "execute_horizon": 4},
    }}}


@pytest.mark.parametrize("server_args", [{"chunk_size": 4}, {}])
def test_a_live_run_of_a_server_answering_from_its_chunk_buffer_is_refused(server_args):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(_run(server_args), source="live.yaml")
    text = str(info.value)
    assert "live" in text and "chunk buffer" in text and "chunk_size: 1" in text and "policy" in text
    load_experiment_dict(_run({"chunk_size": 1}), source="live.yaml")  # every reply computed from its observation


class _Env:
    """What the policy reads of a Meta-World env: 4-dim actions, no null action."""

    num_envs = 1
    task_description = "Reach the goal."
    action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float64)

    def null_action(self, env_id: int) -> None:
        return None


def _obs(step: int) -> dict[str, Any]:
    return {"policy": {"state": np.full((1, 39), float(step))},
            "camera_obs": {"corner": np.zeros((1, 8, 8, 3), np.uint8)}}


def test_live_requests_with_chunk_size_1_run_the_model_on_every_observation_sent(serve_dummy):
    with serve_dummy(chunk_size=1) as (model, port):
        config = VlaEvalRemoteConfig(remote_port=port, embodiment="metaworld", connect_timeout_s=20,
                                     first_request_timeout_s=30, request_timeout_s=30)
        live = LivePolicy(VlaEvalRemotePolicy(config), ExecutionConfig(mode="live", delay={"steps": 1}, execute_horizon=4),
                          hold="continue_chunk", control_hz=80.0)
        env = _Env()
        live.start(env)
        live.set_task_description(env.task_description)
        try:
            live.reset([0], [3])
            executed = [live.get_action(env, _obs(t))[0].copy() for t in range(12)]
            record = live.episode_info(0)
        finally:
            live.close()
    # a request every 4 steps, each answered by a model call on the observation it sent
    assert len(model.batch_sizes) == 3 and [float(o["states"][0]) for o in model.observations] == [0.0, 4.0, 8.0]
    assert [round(a[0] * 100) for a in executed] == [0] * 4 + [0, 1, 1, 1] + [1, 2, 2, 2]  # the model's step mark
    assert model.episode_starts and all(start.get("mode") == "live" for start in model.episode_starts)
    live_record = record["live"]
    assert live_record["ages"] == [0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3] and live_record["delays"] == [1, 1]
    assert record["serving"] == "step"
