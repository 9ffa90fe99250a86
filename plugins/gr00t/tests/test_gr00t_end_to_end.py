"""`arena run` on franka_kitchen against the GR00T double (the runner is a subprocess)."""

from __future__ import annotations

from typing import Any

import pytest

from arena_gr00t.testing import Gr00tDouble

pytestmark = pytest.mark.slow


def kitchen_run(port: int, episodes: int, steps: int, **policy: Any) -> dict[str, Any]:
    """One franka_kitchen microwave run of 2 envs, gr00t_remote against an external server."""
    return {
        "environment": {"type": "franka_kitchen", "task": "microwave", "image_height": 48, "image_width": 64},
        "environment_builder": {"num_envs": 2, "seed": 0},
        "rollout_limit": {"num_episodes": episodes, "max_episode_steps": steps},
        "policy": {"type": "gr00t_remote", "remote_host": "127.0.0.1", "remote_port": port, "open_loop_horizon": 2, **policy},
        "server": {"external": True},
    }


def test_arena_run_on_franka_kitchen_against_the_gr00t_double(run_experiment):
    with Gr00tDouble(restart_on_request=2) as server:
        run = kitchen_run(server.port, 3, 4, request_timeout_s=3, first_request_timeout_s=3)
        outcome = run_experiment({"requires": {"arena-plugin-gr00t": ">=0.1"}, "runs": {"microwave_gr00t": run}})
    assert outcome.exit_code == 0, outcome.explain()
    records = outcome.episodes("microwave_gr00t")
    assert [r["episode_index"] for r in records] == [0, 1, 2]
    assert all(r["outcome"] in ("success", "failure", "timeout") for r in records)
    assert server.restarts == 1  # the server restarted mid-episode and nothing was lost
    assert set(server.batches) <= {2}
    first = server.requests[[r.get("endpoint") for r in server.requests].index("get_action")]
    lang = first["data"]["observation"]["language"]["annotation.language.language_instruction"]
    assert lang == [["open the microwave door"]] * 2


def test_arena_run_against_a_sim_policy_wrapper_server(run_experiment):
    with Gr00tDouble(generation="n1.6-sim") as server:
        run = kitchen_run(server.port, 2, 3, wire_generation="n1.6-sim")
        outcome = run_experiment({"requires": {"arena-plugin-gr00t": ">=0.1"}, "runs": {"microwave_gr00t_sim": run}})
    assert outcome.exit_code == 0, outcome.explain()
    records = outcome.episodes("microwave_gr00t_sim")
    assert sorted(r["episode_index"] for r in records) == [0, 1]
    assert all(r["outcome"] in ("success", "failure", "timeout") for r in records)
    gets = [r for r in server.requests if r.get("endpoint") == "get_action"]
    flat = gets[0]["data"]["observation"]
    assert flat["annotation.language.language_instruction"] == ["open the microwave door"] * 2
    assert "video.exterior_image_1_left" in flat and "state.joint_position" in flat
