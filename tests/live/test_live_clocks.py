"""What a live run's records say about time, checked against what the simulator executed:
one measured clock per env, each executed action's age, and schedules a chunk cannot fill
(arena's real rollout driving :class:`arena.live.policy.LivePolicy` on counters; issue 47)."""

from __future__ import annotations

import pytest

from live_fakes import RowChunkPolicy, live_records

HZ = 50.0  # a 20 ms control period keeps the measured runs under a second
SLOW_S = 0.05  # env 0's chunks take 2.5 periods


def test_an_env_starting_episodes_never_stops_another_envs_measured_clock():
    execution = {"clock": "measured", "execute_horizon": 8}
    alone = live_records(1, RowChunkPolicy(16, {0: SLOW_S}), execution, [0], max_steps=40, control_hz=HZ)[0]
    # env 1 runs 3-step episodes with fast chunks, starting one every few ticks beside seed 0
    shorts = list(range(100, 112))
    beside = live_records(2, RowChunkPolicy(16, {0: SLOW_S}), execution, [0, *shorts], max_steps=40,
                          lengths=dict.fromkeys(shorts, 3), control_hz=HZ)[0]
    a, b = alone.policy_extras["live"], beside.policy_extras["live"]
    assert alone.steps == beside.steps == 40
    # each request held its env for the ticks its 50 ms took (3, or 2..4 when a tick jitters),
    # beside another env as alone: nobody's first chunk froze the clock
    for delays in (a["delays"], b["delays"]):
        assert len(delays) >= 4 and all(2 <= d <= 4 for d in delays), (a["delays"], b["delays"])
    assert abs(len(a["delays"]) - len(b["delays"])) <= 1
    assert b["elapsed_s"] <= a["elapsed_s"] + 3 / HZ and beside.metrics["live_control_hz"] > 0.8 * HZ
    # the recorded delays are the steps the env executed while its requests were in flight:
    # its ages are exactly those of RTC's schedule with these delays
    for live, steps in ((a, alone.steps), (b, beside.steps)):
        assert live["ages"] == _ages_of(live["delays"], 8, steps)


def _ages_of(delays: list[int], s: int, steps: int) -> list[int | None]:
    """The ages ``continue_chunk`` executes with these measured delays: the null action until
    the first chunk, rows d..s-1 of each chunk (ages d..s-1), the previous chunk's rows s..
    while a request is in flight (ages s..), and that again until the episode ends."""
    ages: list[int | None] = [None] * delays[0] + list(range(delays[0], s))
    for d in delays[1:]:
        ages += list(range(s, s + d)) + list(range(d, s))
    ages += list(range(s, s + steps))
    return ages[:steps]


def test_every_executed_action_has_an_age_no_older_than_the_schedule_allows(tmp_path):
    from arena.rollout.trajectories import read_trajectory

    d, s = 2, 4
    record = live_records(1, RowChunkPolicy(16), {"delay": {"steps": d}, "execute_horizon": s}, [7], max_steps=14,
                          trajectories=tmp_path)[7]
    live = record.policy_extras["live"]
    # the first chunk (waited for): rows 0..3 at ages 0..3; then per cycle the previous
    # chunk's rows 4, 5 (ages 4, 5) while the request is in flight, then rows 2, 3 of the new one
    assert live["ages"] == [0, 1, 2, 3, 4, 5, 2, 3, 4, 5, 2, 3, 4, 5]
    assert max(live["ages"]) <= s + d - 1
    assert live["age"] == {"mean": pytest.approx(43 / 14, abs=1e-3), "p95": 5, "max": 5, "null_steps": 0}
    # a fixed simulated delay makes every episode's ages alike: the configuration's, no metric
    assert "live_age_mean" not in record.metrics
    # and beside each step's action in the episode's trajectory file
    trajectory = read_trajectory(tmp_path / record.trajectory)
    assert trajectory.columns["live_age"].tolist() == live["ages"] and trajectory.action[:, 0].tolist()[:8] == [
        0, 1, 2, 3, 4, 5, 102, 103]
    null = live_records(1, RowChunkPolicy(16), {"delay": {"steps": d}, "execute_horizon": s, "hold": "null_action"},
                        [7], max_steps=8)[7].policy_extras["live"]
    assert null["ages"] == [0, 1, 2, 3, None, None, 2, 3] and null["age"]["null_steps"] == 2


@pytest.mark.parametrize("clock", ["simulated", "measured"])
def test_a_chunk_shorter_than_the_schedule_is_an_error_naming_both_numbers(clock):
    # delay 6, execute horizon 8, chunks of 4 rows: no row of a later chunk could ever run
    execution = {"delay": {"steps": 6}} if clock == "simulated" else {"clock": "measured"}
    records = live_records(2, RowChunkPolicy(4), {**execution, "execute_horizon": 8}, [0, 1], max_steps=40, control_hz=HZ)
    for record in records.values():
        assert record.outcome == "error" and record.steps <= 2, (record.outcome, record.steps)
        assert "chunk of 4 rows" in record.error and "needs at least 8 (execute_horizon 8)" in record.error, record.error


def test_a_simulated_clock_reports_no_control_rate_and_a_fixed_delay_no_interval():
    fixed = live_records(1, RowChunkPolicy(16), {"delay": {"steps": 2}, "execute_horizon": 4}, [0], max_steps=12)[0]
    assert "live_control_hz" not in fixed.metrics and "live_delay_steps" not in fixed.metrics
    assert "live_age_max" not in fixed.metrics and fixed.policy_extras["live"]["age"]["max"] == 5
    drawn = live_records(1, RowChunkPolicy(16), {"delay": {"steps": [1, 2]}, "execute_horizon": 4}, [0], max_steps=12)[0]
    assert "live_control_hz" not in drawn.metrics
    assert {"live_delay_steps", "live_age_mean", "live_age_max"} <= set(drawn.metrics)
    assert drawn.metrics["live_age_max"] == max(drawn.policy_extras["live"]["ages"])


@pytest.mark.parametrize("hold", ["continue_chunk", "repeat_last"])
def test_before_the_first_chunk_an_absolute_control_env_holds_its_own_pose(hold):
    # an env with a stay action (its pose as the target: -(10 + t) at step t) holds the pose it
    # started the episode in while its first request is in flight (the first step's stay action,
    # then repeated), never a zero target; after that the hold rule runs as before
    executed: dict[int, list[float]] = {}
    execution = {"clock": "measured", "execute_horizon": 4, "hold": hold}
    record = live_records(1, RowChunkPolicy(16, {0: SLOW_S}), execution, [0], max_steps=12, control_hz=HZ,
                          stay=True, executed=executed)[0]
    first = record.policy_extras["live"]["delays"][0]
    assert first >= 2  # the first chunk took a few ticks
    assert executed[0][:first] == [-10.0] * first
    assert executed[0][first:4] == list(range(first, 4))  # then the first chunk's rows, by their age
    assert 0.0 not in executed[0][:first]
