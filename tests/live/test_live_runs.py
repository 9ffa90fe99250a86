"""Live mode end to end on Meta-World (CPU, seconds): records, validation errors, and the same
seed + the same simulated delays giving the same episodes whatever the env / worker layout."""

from __future__ import annotations

import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.testing.experiments import tiny_experiment

DELAYS = {"steps": [0, 1, 2, 3, 4], "seed": 5}


def live_run(num_envs: int, workers: int, policy: dict, **execution) -> dict:
    exp = tiny_experiment(policy, task="reach-v3", episodes=5, max_episode_steps=30, num_envs=num_envs,
                          environment={"type": "metaworld", "task": "reach-v3", "workers": workers})
    exp["runs"]["run"]["execution"] = {"mode": "live", "execute_horizon": 4, "delay": DELAYS, **execution}
    return exp


def episodes_of(outcome) -> list[tuple]:
    assert outcome.exit_code == 0, outcome.explain()
    return [(r["episode_index"], r["seed"], r["steps"], r["return"], r["outcome"], r["policy_extras"]["live"]["delays"])
            for r in outcome.episodes("run")]


@pytest.mark.parametrize("hold", ["null_action"])
def test_same_seed_and_delays_give_the_same_episodes_on_any_layout(run_experiment, hold):
    policy = {"type": "random_action", "seed": 3}
    one = episodes_of(run_experiment(live_run(1, 0, policy, hold=hold)))
    spread = episodes_of(run_experiment(live_run(3, 2, policy, hold=hold)))  # 3 envs over 2 worker processes
    assert one == spread
    assert len({tuple(e[5]) for e in one}) > 1  # the delays were drawn, per episode
    assert all(set(e[5]) <= {0, 1, 2, 3, 4} and len(e[5]) == 7 for e in one)  # 30 steps, s = 4: 7 requests after the first


def test_live_expert_records_delays_stale_ratio_and_latency(run_experiment, reference_server):
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": reference_server.port},
                          episodes=2, max_episode_steps=150, external_server=True)
    exp["runs"]["run"]["execution"] = {"mode": "live", "execute_horizon": 4, "delay": {"ms": 25}}  # 2 steps at 80 Hz
    outcome = run_experiment(exp)
    records = outcome.episodes("run")
    assert outcome.exit_code == 0, outcome.explain()
    for r in records:
        live = r["policy_extras"]["live"]
        assert live["hold"] == "continue_chunk" and set(live["delays"]) == {2}
        # a request every s = 4 steps, its first d = 2 steps held (the expert answers one action,
        # held for the chunk); the episode may end inside a cycle's hold
        steps = r["steps"]
        assert len(live["delays"]) == -(-(steps - 4) // 4) and live["requests"] == len(live["delays"]) + 1
        assert live["stale_steps"] == sum((t - 4) % 4 < 2 for t in range(4, steps))
        assert r["metrics"]["live_stale_ratio"] == pytest.approx(live["stale_steps"] / r["steps"])
        assert {"live_latency_p50_ms", "live_latency_p99_ms"} <= set(r["metrics"])
        # a simulated clock has no control rate, and a fixed delay (with the ages it makes) is the
        # configuration, not a measurement
        assert not {"live_control_hz", "live_delay_steps", "live_age_mean"} & set(r["metrics"])
        assert live["age"]["max"] <= 4 - 1 + 2
        assert live["latency_ms"]["p99"] >= live["latency_ms"]["p50"] > 0
    assert [r["outcome"] for r in records] == ["success", "success"]  # reach survives 2 stale steps in 4
    summary = outcome.result["runs"]["run"]["metrics"]
    assert "live_stale_ratio" in summary
    # latency cannot be negative: Student's t clipped at 0 ms; the stale ratio is a fraction
    for key in ("live_latency_p50_ms", "live_latency_p99_ms"):
        assert summary[key]["method"] == "student-t-clipped" and summary[key]["bounds"] == [0.0, None]
        assert 0.0 <= summary[key]["ci_low"] <= summary[key]["mean"] <= summary[key]["ci_high"]
    assert summary["live_stale_ratio"]["method"] == "betting-bounded-mean"


@pytest.mark.parametrize(
    "execution, key, message",
    [
        ({"mode": "live", "hold": "repeat_last"}, "execution.hold", "not valid for environment 'metaworld'"),
        ({"mode": "live", "delay": {"steps": 9}}, "execution.execute_horizon", "below the largest delay"),
        ({"mode": "live", "clock": "measured", "delay": {"steps": 1}}, "execution.delay", "leave delay unset"),
        ({"mode": "later"}, "execution.mode", "sync"),
    ],
)
def test_bad_execution_names_the_run_and_key(execution, key, message):
    exp = tiny_experiment({"type": "zero_action"})
    exp["runs"]["run"]["execution"] = execution
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(exp, source="live.yaml")
    text = str(info.value)
    assert key in text and "run" in text and message in text and "live.yaml" in text


def test_rtc_requests_carry_the_delay_and_the_leftover_on_the_wire(run_experiment, openpi_double):
    rows = 12

    def reply(request):
        # row r of every chunk is r / 100 in each of Meta-World's 4 dims: the leftover is checkable
        return {"actions": np.repeat((np.arange(rows) / 100.0)[:, None], 4, axis=1)}

    double = openpi_double(reply)
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": double.port, "open_loop_horizon": rows},
                          episodes=1, max_episode_steps=20, external_server=True)
    exp["runs"]["run"]["execution"] = {"mode": "live", "execute_horizon": 8, "delay": {"steps": 3}, "rtc": True}
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    sent = double.model.requests
    assert len(sent) == 3  # steps 0, 8, 16
    assert [r["inference_delay"] for r in sent] == [0, 3, 3] and {r["execute_horizon"] for r in sent} == {8}
    assert "prev_chunk_left_over" not in sent[0]  # the episode's first request has no previous chunk
    for request in sent[1:]:  # rows 8..11 of the previous chunk, in the env's action space
        assert np.allclose(np.asarray(request["prev_chunk_left_over"]), np.repeat((np.arange(8, rows) / 100.0)[:, None], 4, 1))
