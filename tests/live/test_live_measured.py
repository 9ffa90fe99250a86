"""Measured live mode: the simulator is paced by the wall clock at its control rate while a
slow policy server thinks, and each request's delay is the steps it really took."""

from __future__ import annotations

import time

import pytest

from arena.testing.experiments import tiny_experiment

from live_fakes import TiledExpert

pytestmark = pytest.mark.slow

INFER_S = 0.1  # 8 control periods of Meta-World's 80 Hz


def test_measured_clock_paces_steps_and_measures_delays(run_experiment, policy_server):
    server = policy_server(TiledExpert(16, delay_s=INFER_S))
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": server.port, "open_loop_horizon": 16},
                          episodes=1, max_episode_steps=120, external_server=True)
    exp["runs"]["run"]["execution"] = {"mode": "live", "clock": "measured", "execute_horizon": 12}
    began = time.perf_counter()
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    (record,) = outcome.episodes("run")
    live, metrics = record["policy_extras"]["live"], record["metrics"]
    steps = record["steps"]
    # paced: never faster than 80 Hz, however fast Meta-World steps (about 1 ms here); on a
    # loaded machine a step may take longer than a period (then the next starts at once)
    assert live["elapsed_s"] >= (steps - 1) / 80 * 0.98 and metrics["live_control_hz"] <= 81
    assert time.perf_counter() - began >= steps / 80
    # each request held the simulator for the ticks its 100 ms took: at least one, and no more
    # than fit into its latency at 80 Hz
    worst = live["latency_ms"]["max"] / 1e3
    assert live["delays"] and all(1 <= d <= worst * 80 + 1 for d in live["delays"]), live["delays"]
    assert live["latency_ms"]["p50"] >= INFER_S * 1e3
    assert live["stale_steps"] >= sum(live["delays"]) and metrics["live_stale_ratio"] > 0.3
