"""Measured live mode: the simulator is paced by the wall clock at its control rate while a
slow policy server thinks, and each request's delay is the steps it really took."""

from __future__ import annotations

import time

import numpy as np

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
    # than fit into its latency at 80 Hz, plus the step under way when it was sent and the one
    # under way when its reply arrived (on a loaded machine a step can outlast a period)
    worst = live["latency_ms"]["max"] / 1e3
    assert live["delays"] and all(1 <= d <= worst * 80 + 2 for d in live["delays"]), live["delays"]
    assert live["latency_ms"]["p50"] >= INFER_S * 1e3
    assert live["stale_steps"] >= sum(live["delays"]) and metrics["live_stale_ratio"] > 0.3


def test_measured_rtc_delay_leaves_out_the_warm_up_and_never_exceeds_the_horizon(run_experiment, openpi_double):
    rows, s = 16, 8

    def reply(request):
        return {"actions": np.zeros((rows, 4))}

    # the episode's first request takes 300 ms (24 steps at 80 Hz: a warm-up), later ones 25 ms
    double = openpi_double(reply, infer_delay_s=0.025, first_delay_s=0.3)
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": double.port, "open_loop_horizon": rows},
                          episodes=1, max_episode_steps=70, external_server=True)
    exp["runs"]["run"]["execution"] = {"mode": "live", "clock": "measured", "execute_horizon": s, "rtc": True}
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    (record,) = outcome.episodes("run")
    delays = record["policy_extras"]["live"]["delays"]
    sent = [r["inference_delay"] for r in double.model.requests]
    assert delays[0] >= 20 and len(delays) >= 4, delays  # the warm-up held the env
    # LeRobot's estimate (the largest recent delay) over the delays after the first request;
    # before there is one, the warm-up's, clipped to the execute horizon
    expected = [0, min(delays[0], s)] + [min(max(delays[1:k]), s) for k in range(2, len(delays) + 1)]
    n = min(len(sent), len(expected))  # the episode may end before or after its last request was sent
    assert n >= 4 and sent[:n] == expected[:n], (sent, delays)
    assert max(sent) <= s and max(sent[2:]) <= max(delays[1:]) < 8
