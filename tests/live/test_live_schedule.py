"""The simulated live schedule, step by step: which action the simulator executed at each
step for delays d = 0, 2, 4 and execute horizons s = 4, 8 (RTC's protocol, arena.live.schedule)."""

from __future__ import annotations

import numpy as np
import pytest

from arena.errors import PolicyError
from arena.live.config import DelayConfig, ExecutionConfig, ms_to_steps
from arena.live.policy import LivePolicy
from arena.live.schedule import DelaySampler

from live_fakes import CounterEnv, RowChunkPolicy


def drive(d: int, s: int, hold: str, steps: int, rows: int = 16):
    env = CounterEnv(num_envs=1)
    inner = RowChunkPolicy(rows)
    live = LivePolicy(inner, ExecutionConfig(mode="live", hold=hold, delay={"steps": d}, execute_horizon=s),
                      hold=hold, control_hz=10.0)
    live.start(env)
    obs = env.reset_envs([0], [7])
    live.reset([0], [7])
    for _ in range(steps):
        obs = env.step(live.get_action(env, obs))[0]
    return env.executed[0], inner.asked[0], live.episode_info(0)


def expected(d: int, s: int, hold: str, steps: int) -> list[float]:
    """RTC's schedule written out: chunk k (requested at step k*s) executes rows d..s-1 after
    d hold steps; the first chunk is waited for."""
    out: list[float] = list(range(s))
    k = 1
    while len(out) < steps:
        if hold == "continue_chunk":
            held = [100 * (k - 1) + s + j for j in range(d)]
        elif hold == "repeat_last":
            held = [out[-1]] * d
        else:
            held = [-1.0] * d
        out += held + [100 * k + r for r in range(d, s)]
        k += 1
    return [float(v) for v in out[:steps]]


def test_d2_s4_continue_chunk_written_out():
    executed, asked, info = drive(2, 4, "continue_chunk", 12)
    assert executed == [0, 1, 2, 3, 4, 5, 102, 103, 104, 105, 202, 203]
    assert asked == [0, 4, 8]  # a request every s steps, seeing that step's observation
    live = info["live"]
    assert live["delays"] == [2, 2] and live["stale_steps"] == 4 and live["steps"] == 12
    assert info["metrics"]["live_stale_ratio"] == pytest.approx(4 / 12)


def test_d2_s4_repeat_last_and_null_action_written_out():
    assert drive(2, 4, "repeat_last", 12)[0] == [0, 1, 2, 3, 3, 3, 102, 103, 103, 103, 202, 203]
    assert drive(2, 4, "null_action", 12)[0] == [0, 1, 2, 3, -1, -1, 102, 103, -1, -1, 202, 203]


def test_d4_s4_executes_only_the_previous_chunks_rows():
    # s = d: every step after the first chunk comes from the chunk before (RTC's inpainted prefix)
    assert drive(4, 4, "continue_chunk", 12)[0] == [0, 1, 2, 3, 4, 5, 6, 7, 104, 105, 106, 107]


@pytest.mark.parametrize("hold", ["continue_chunk", "repeat_last", "null_action"])
@pytest.mark.parametrize("s", [4, 8])
@pytest.mark.parametrize("d", [0, 2, 4])
def test_schedule_step_by_step(d, s, hold):
    executed, asked, info = drive(d, s, hold, 3 * s + 2)
    assert executed == expected(d, s, hold, 3 * s + 2)
    assert asked == [0, s, 2 * s, 3 * s]
    n = 3 * s + 2
    assert info["live"]["stale_steps"] == sum((t - s) % s < d for t in range(s, n))
    assert info["live"]["delays"] == [d, d, d]


def test_d0_is_sync_chunk_replay_whatever_the_hold():
    runs = {hold: drive(0, 8, hold, 20)[0] for hold in ("continue_chunk", "repeat_last", "null_action")}
    assert runs["continue_chunk"] == runs["repeat_last"] == runs["null_action"] == expected(0, 8, "continue_chunk", 20)


def test_a_chunk_without_the_rows_continue_chunk_holds_is_refused():
    # chunks of 5 rows, s = 4, d = 2: the hold needs rows 4 and 5; only row 4 exists
    with pytest.raises(PolicyError, match=r"chunk of 5 rows; this live schedule needs at least 6"):
        drive(2, 4, "continue_chunk", 8, rows=5)
    assert drive(2, 4, "repeat_last", 8, rows=5)[0] == [0, 1, 2, 3, 3, 3, 102, 103]  # needs rows 0..3 only


def test_a_one_action_policy_is_replanned_every_s_steps():

    class Steps(RowChunkPolicy):
        get_action_chunk = None  # type: ignore[assignment]

        def get_action(self, env, observation):
            return observation["policy"]["t"].copy()

    env = CounterEnv(num_envs=1)
    live = LivePolicy(Steps(), ExecutionConfig(mode="live", delay={"steps": 1}, execute_horizon=3),
                      hold="continue_chunk", control_hz=None)
    live.start(env)
    obs = env.reset_envs([0], [0])
    live.reset([0], [0])
    for _ in range(9):
        obs = env.step(live.get_action(env, obs))[0]
    # the target seen at step 0 held for 3 steps; then 1 step of the old target, 2 of the new
    assert env.executed[0] == [0, 0, 0, 0, 3, 3, 3, 6, 6]


def test_delay_draws_depend_only_on_the_seeds():
    cfg = DelayConfig(steps=[0, 1, 2, 3, 4], seed=3)
    a = [DelaySampler(cfg, None, 11).next() for _ in range(1)]
    one, two = DelaySampler(cfg, None, 11), DelaySampler(cfg, None, 11)
    draws = [one.next() for _ in range(200)]
    assert draws == [two.next() for _ in range(200)]
    assert set(draws) == {0, 1, 2, 3, 4} and a[0] == draws[0]
    assert draws != [DelaySampler(cfg, None, 12).next() for _ in range(200)]
    weighted = DelaySampler(DelayConfig(steps=[1, 3], p=[0.9, 0.1]), None, -5)  # negative seeds are fine
    assert 0.8 < np.mean([weighted.next() == 1 for _ in range(2000)]) < 0.97


def test_ms_delays_become_control_steps():
    assert ms_to_steps(100, 10) == 1 and ms_to_steps(101, 10) == 2 and ms_to_steps(0, 50) == 0
    assert DelayConfig(ms=[50, 200]).step_values(10.0) == [1, 2]
    with pytest.raises(ValueError, match="control_hz"):
        DelayConfig(ms=50).step_values(None)


@pytest.mark.parametrize(
    "delay, message",
    [({"steps": 1, "ms": 2}, "not both"), ({"steps": -1}, ">= 0"), ({"steps": [1, 2], "p": [0.5]}, "probabilities"),
     ({"steps": 2, "p": [1.0]}, "needs a list")],
)
def test_bad_delays_are_refused(delay, message):
    with pytest.raises(ValueError, match=message):
        DelayConfig(**delay)


def test_execution_checks_name_the_key():
    class NoHold(CounterEnv):
        hold_rules = ()
        control_hz = None

    live = ExecutionConfig(mode="live", delay={"steps": 6}, execute_horizon=4, hold="null_action")
    assert dict(live.check(CounterEnv, CounterEnv.Config())) == {
        "execute_horizon": "execute_horizon 4 is below the largest delay, 6 steps (RTC's protocol needs s >= d)"
    }
    problems = dict(ExecutionConfig(mode="live", delay={"ms": 50}).check(NoHold, NoHold.Config()))
    assert "declares no hold rule" in problems["hold"] and "control_hz" in problems["delay.ms"]
    assert ExecutionConfig(mode="sync", delay={"steps": 99}).check(NoHold, NoHold.Config()) == []
