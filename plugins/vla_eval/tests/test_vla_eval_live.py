"""``vla_eval_remote`` in live mode against vla-eval 0.8.0's real server code: arena streams an
observation every control step, as vla-eval's own live runner does, and records each executed
action's age from the observation the model ran on -- the same ages (within one tick) as
vla-eval's ``LiveEpisodeRunner`` driving the same dummy model on the same environment.

The dummy model marks every row with the session's observation count when it ran (its
``0.01 * step`` column), so the tests read which observation each executed action really came
from, independently of what arena computes."""

from __future__ import annotations

import time
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

STATE_DIM, TASK = 39, "Reach the goal."


def _run(server_args: dict[str, Any], **execution: Any) -> dict[str, Any]:
    return {"runs": {"live": {
        "environment": {"type": "metaworld", "task": "reach-v3"},
        "policy": {"type": "vla_eval_remote", "remote_port": 9, "server_args": server_args},
        "server": {"external": True},
        "execution": {"mode": "live", "delay": {"steps": 1}, "execute_horizon": 4, **execution},
    }}}


@pytest.mark.parametrize(("server_args", "execution", "says"), [
    ({}, {}, "server_args.chunk_size"),
    ({"chunk_size": 4, "continuous_inference": True}, {}, "continuous_inference"),
    ({"chunk_size": 4}, {"rtc": True}, "execution.rtc"),
])
def test_a_live_run_whose_served_rows_cannot_be_traced_to_their_observation_is_refused(server_args, execution, says):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(_run(server_args, **execution), source="live.yaml")
    text = str(info.value)
    assert says in text and "live" in text and "policy" in text
    load_experiment_dict(_run({"chunk_size": 4}), source="live.yaml")  # a known buffer: streamed
    load_experiment_dict(_run({"chunk_size": 1}), source="live.yaml")


class _Env:
    """What the policy reads of a Meta-World env: 4-dim actions, no null action."""

    num_envs = 1
    task_description = TASK
    action_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float64)

    def null_action(self, env_id: int) -> None:
        return None


def _obs(step: int) -> dict[str, Any]:
    """The environment's observation before step ``step``: its state says the step."""
    return {"policy": {"state": np.full((1, STATE_DIM), float(step))},
            "camera_obs": {"corner": np.zeros((1, 8, 8, 3), np.uint8)}}


def _arena_live(port: int, execution: ExecutionConfig, hold: str, control_hz: float, steps: int) -> tuple[list, dict]:
    """Run one live episode of ``steps`` steps: ``(executed actions, the episode's record)``."""
    config = VlaEvalRemoteConfig(remote_port=port, embodiment="metaworld", connect_timeout_s=20,
                                 first_request_timeout_s=30, request_timeout_s=30, server_args={"chunk_size": 4})
    live = LivePolicy(VlaEvalRemotePolicy(config), execution, hold=hold, control_hz=control_hz)
    env = _Env()
    live.start(env)
    live.set_task_description(env.task_description)
    try:
        live.reset([0], [3])
        executed = [live.get_action(env, _obs(t))[0].copy() for t in range(steps)]
        record = live.episode_info(0)
    finally:
        live.close()
    return executed, record


def _marked_source(action: np.ndarray) -> int:
    """The observation (step) the dummy model ran on for this row (its first column)."""
    return int(round(action[0] * 100))


def test_a_buffered_server_on_a_simulated_delay_is_sent_every_step_and_its_rows_age_honestly(serve_dummy):
    # the case: chunk_size 4, delay 1; before, 3 requests for 12 steps, rows up to 16 steps old
    with serve_dummy(chunk_size=4) as (model, port):
        executed, record = _arena_live(
            port, ExecutionConfig(mode="live", delay={"steps": 1}, execute_horizon=4), "repeat_last", 10.0, 12)
    assert len(model.observations) == 3  # the model ran on observations 0, 4, 8 (the rest from its buffer) ...
    assert [float(o["states"][0]) for o in model.observations] == [0.0, 4.0, 8.0]
    assert model.episode_starts and all(start.get("mode") == "live" for start in model.episode_starts)
    live = record["live"]
    # ... of the 12 sent; 11 replies executed (the last one's, due at step 12, is past the episode)
    assert live["requests"] == 11 and live["delays"] == [0] + [1] * 10
    # step t executes the reply to observation t - 1 (delay 1; the first is waited for): row (t-1) % 4 of
    # the chunk computed from observation 4 * ((t-1) // 4)
    assert live["ages"] == [0, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3]
    sources = [t - a for t, a in enumerate(live["ages"])]
    assert [_marked_source(a) for a in executed] == sources  # what arena records is what the model saw
    assert max(live["ages"]) <= 4  # chunk_size + delay - 1, never the 16 steps of before


# -- parity with vla-eval's own live runner ---------------------------------------------------
# the model's 0.21 s ends 90 ms before a tick: room for the round trips arena makes while the
# server's backlog drains (vla-eval pipelines them), on a busy machine too
HZ, LATENCY_S, STEPS = 10.0, 0.21, 12


def _vla_eval_live_sources(port: int) -> list[int | None]:
    """vla-eval 0.8.0's ``LiveEpisodeRunner`` (its ``Connection``, ``ActionBuffer`` and real-time
    ``Clock``) on the same environment: per step, the observation the executed action was
    computed from (``None``: the hold before the first action)."""
    import anyio
    from vla_eval.benchmarks.base import Benchmark, repeat_last_hold
    from vla_eval.connection import Connection
    from vla_eval.runners.live_runner import LiveEpisodeRunner

    applied: list[Any] = []
    before_first = {"actions": np.zeros(4, np.float32)}

    class SameEnvironment(Benchmark):
        """The test's environment for vla-eval: its state says the step; absolute actions."""

        def __init__(self) -> None:
            self.step = 0

        def get_tasks(self) -> list:
            return [{"name": "reach-v3"}]

        async def start_episode(self, task: Any, recorder: Any = None) -> None:
            self.step = 0

        async def apply_action(self, action: Any) -> None:
            applied.append(action)
            self.step += 1

        async def get_observation(self) -> dict[str, Any]:
            return {"images": {"corner": np.zeros((8, 8, 3), np.uint8)},
                    "states": np.full(STATE_DIM, float(self.step)), "task_description": TASK}

        async def is_done(self) -> bool:
            return False

        async def get_time(self) -> float:
            return self.step / HZ

        async def get_result(self) -> dict[str, Any]:
            return {"success": False}

        def get_hold_action(self, last_action: Any) -> Any:  # absolute targets: vla-eval's repeat_last_hold
            return before_first if last_action is None else repeat_last_hold(last_action, 4)

    async def main() -> None:
        conn = Connection(f"ws://127.0.0.1:{port}", timeout=20.0)
        await conn.connect()
        try:
            await LiveEpisodeRunner(hz=HZ).run_episode(SameEnvironment(), {"name": "reach-v3"}, conn, max_steps=STEPS)
        finally:
            await conn.close()

    anyio.run(main)
    return [None if a is before_first else _marked_source(np.asarray(a["actions"])) for a in applied]


def test_arena_live_and_vla_evals_live_runner_execute_actions_of_the_same_observations(serve_dummy):
    with serve_dummy(chunk_size=4, delay_s=LATENCY_S) as (model, port):
        theirs = _vla_eval_live_sources(port)
        started = time.perf_counter()
        executed, record = _arena_live(
            port, ExecutionConfig(mode="live", clock="measured", execute_horizon=4), "repeat_last", HZ, STEPS)
        elapsed = time.perf_counter() - started
    ages = record["live"]["ages"]
    ours = [None if a is None else t - a for t, a in enumerate(ages)]
    # arena's recorded ages are the model's: each executed row's mark names the observation arena says
    assert [_marked_source(executed[t]) for t, s in enumerate(ours) if s is not None] == [s for s in ours if s is not None]
    assert len(ours) == len(theirs) == STEPS and elapsed >= (STEPS - 1) / HZ  # a real clock, both sides
    # the same action at every step, up to one tick of timing either way
    for t in range(STEPS):
        near = {theirs[u] for u in (t - 1, t, t + 1) if 0 <= u < STEPS}
        assert ours[t] in near, (t, ours, theirs)
    # neither waits for the first action: until it arrives both hold zeros (vla-eval's repeat_last_hold(None))
    assert ours[0] is None and theirs[0] is None
    assert all(not executed[t].any() for t in range(STEPS) if ours[t] is None)
    # so the ages they record (step - that observation) agree within one tick: the same
    # sequence, shifted by at most one step, the same largest age and hold before the first
    their_ages = [None if s is None else t - s for t, s in enumerate(theirs)]
    assert abs(max(a for a in ages if a is not None) - max(a for a in their_ages if a is not None)) <= 1, (ages, their_ages)
    assert abs(ages.count(None) - their_ages.count(None)) <= 1 and record["live"]["age"]["null_steps"] == ages.count(None)
    # a latency of 2.1 ticks and a buffer of 4: the model ran on every 4th observation of the episode
    assert {s for s in ours if s is not None} <= {0, 4, 8} and {s for s in theirs if s is not None} <= {0, 4, 8}
