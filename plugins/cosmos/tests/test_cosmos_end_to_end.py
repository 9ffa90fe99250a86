"""``arena run`` with ``cosmos_remote`` on franka_kitchen against the Cosmos server double."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from arena.testing.plugin_tests import OSMESA, arena_run, experiment_against, listed_plugin, run_arena, without_distribution
from arena_cosmos.testing import cosmos_server_double

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cosmos_droid_kitchen.yaml"


arena = functools.partial(run_arena, env=OSMESA)


@pytest.mark.slow
def test_arena_run_cosmos_on_franka_kitchen_against_the_double(tmp_path):
    from arena.results.run_summary import collect_run_records

    with cosmos_server_double() as server:
        experiment = experiment_against(
            {"type": "cosmos_remote", "cosmos_embodiment_adapter": "droid", "open_loop_horizon": 4}, server,
            {"arena-plugin-cosmos": ">=0.1"}, run="kettle_cosmos", episodes=2, num_envs=2, max_episode_steps=5,
            environment={"type": "franka_kitchen", "task": "kettle", "image_height": 36, "image_width": 64},
        )
        result = arena_run(experiment, tmp_path / "out", env=OSMESA)
        requests = list(server.model.requests)
    records = collect_run_records(tmp_path / "out" / "kettle_cosmos")
    assert [r.episode_index for r in records] == [0, 1]
    for record in records:
        assert record.error is None and record.outcome == "timeout" and record.steps == 5
        assert record.latency["requests"] == 2  # horizon 4 of 32: steps 0 and 4 request
        assert record.server_timing["infer_ms_mean"] >= 0
    assert len(requests) == 4
    assert requests[0]["observation/image"].shape == (540, 640, 3)
    assert requests[0]["prompt"] == "move the kettle to the top left burner"
    # Last: the records above are what this plugin owns; the exit code also covers the report.
    assert result.returncode == 0, result.stdout + result.stderr


def test_cosmos_plugin_is_listed_with_what_it_registers():
    cosmos = listed_plugin("cosmos")
    assert cosmos["distribution"] == "arena-plugin-cosmos"
    assert cosmos["registered"] == {
        "policies": ["cosmos_remote"],
        "embodiment_adapters": ["cosmos/droid"],
        "server_tasks": ["cosmos_remote"],
    }


def test_experiment_requiring_cosmos_fails_before_starting_when_it_is_not_installed(monkeypatch):
    from arena.config import load_experiment
    from arena.errors import ConfigError

    without_distribution(monkeypatch, "arena-plugin-cosmos")
    with pytest.raises(ConfigError, match=r"arena-plugin-cosmos>=0.1, which is not installed: pip install"):
        load_experiment(EXAMPLE)


@pytest.mark.slow
def test_example_validates_and_dry_runs(tmp_path):
    validated = arena("validate", str(EXAMPLE))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "2 run(s)" in validated.stdout
    dry = run_arena("run", str(EXAMPLE), "--dry-run", "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "microwave_cosmos" in dry.stdout and "kettle_cosmos" in dry.stdout
    assert "action_policy_server_robolab" in dry.stdout
    assert not (tmp_path / "out").exists()
