"""`arena run` on franka_kitchen against the DreamZero double (the runner is a subprocess)."""

from __future__ import annotations

import pytest

from arena_dreamzero.testing import DreamZeroDouble

pytestmark = pytest.mark.slow


def test_arena_run_on_franka_kitchen_against_the_dreamzero_double(run_experiment):
    with DreamZeroDouble(restart_on_request=3) as server:
        outcome = run_experiment(
            {
                "requires": {"arena-plugin-dreamzero": ">=0.1"},
                "runs": {
                    "microwave_dreamzero": {
                        "environment": {"type": "franka_kitchen", "task": "microwave", "image_height": 48, "image_width": 64},
                        "environment_builder": {"num_envs": 1, "seed": 0},
                        "rollout_limit": {"num_episodes": 2, "max_episode_steps": 5},
                        "policy": {
                            "type": "dreamzero_remote",
                            "remote_host": "127.0.0.1",
                            "remote_port": server.port,
                            "open_loop_horizon": 2,
                            "connect_timeout_s": 10,
                            "reconnect_timeout_s": 5,
                            "request_timeout_s": 3,
                            "first_request_timeout_s": 3,
                        },
                        "server": {"external": True},
                    }
                },
            }
        )
    assert outcome.exit_code == 0, outcome.explain()
    records = outcome.episodes("microwave_dreamzero")
    assert [r["episode_index"] for r in records] == [0, 1]
    assert all(r["outcome"] in ("success", "failure", "timeout") for r in records)
    assert server.restarts == 1  # restarted mid-episode; the client reconnected with a new session
    assert len(server.sessions) >= 3
    assert {c.prompt for c in server.calls} == {"open the microwave door"}
    assert server.calls[0].frames_received == 1 and server.calls[1].frames_received == 4
