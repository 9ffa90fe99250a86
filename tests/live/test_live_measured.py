"""Measured live mode: the simulator is paced by the wall clock at its control rate while a
slow policy server thinks, and each request's delay is the steps it really took."""

from __future__ import annotations

import time

import numpy as np
import pytest

from arena.models.metaworld_expert import MetaWorldExpertModel
from arena.testing.experiments import tiny_experiment

pytestmark = pytest.mark.slow

INFER_S = 0.1  # 8 control periods of Meta-World's 80 Hz


class SlowChunks:
    """Meta-World's expert behind a model that thinks ``INFER_S`` and answers 16-row chunks."""

    def __init__(self) -> None:
        self.model = MetaWorldExpertModel()

    def metadata(self):
        return self.model.metadata()

    def load(self) -> None:
        self.model.load()

    def infer(self, obs):
        time.sleep(INFER_S)
        action = np.asarray(self.model.infer(obs)["actions"])[:1]
        return {"actions": np.repeat(action, 16, axis=0)}


def test_measured_clock_paces_steps_and_measures_delays(run_experiment, policy_server):
    server = policy_server(SlowChunks())
    exp = tiny_experiment({"type": "metaworld_expert_remote", "remote_port": server.port, "open_loop_horizon": 16},
                          episodes=1, max_episode_steps=120, external_server=True)
    exp["runs"]["run"]["execution"] = {"mode": "live", "clock": "measured", "execute_horizon": 12}
    began = time.perf_counter()
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    (record,) = outcome.episodes("run")
    live, metrics = record["policy_extras"]["live"], record["metrics"]
    steps = record["steps"]
    # paced: 120 steps at 80 Hz take 1.5 s, however fast Meta-World steps (about 1 ms here)
    assert live["elapsed_s"] >= (steps - 1) / 80 * 0.98
    assert 60 <= metrics["live_control_hz"] <= 81
    assert time.perf_counter() - began >= steps / 80
    # each request held the simulator for the steps its 100 ms took (8 at 80 Hz, more on a busy machine)
    assert live["delays"] and all(8 <= d <= 14 for d in live["delays"]), live["delays"]
    assert live["latency_ms"]["p50"] >= INFER_S * 1e3
    assert live["stale_steps"] >= sum(live["delays"]) and metrics["live_stale_ratio"] > 0.5
