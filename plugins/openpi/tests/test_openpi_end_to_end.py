"""``arena run`` with ``pi0_remote`` on franka_kitchen against the openpi server double."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from arena.testing.plugin_tests import OSMESA, arena_run, experiment_against, listed_plugin, run_arena, without_distribution
from arena_openpi.testing import openpi_server_double

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "pi05_droid_kitchen.yaml"


arena = functools.partial(run_arena, env=OSMESA)


@pytest.mark.slow
def test_arena_run_pi0_on_franka_kitchen_against_the_double(tmp_path):
    from arena.results.run_summary import collect_run_records

    with openpi_server_double("droid", "pi0") as server:
        experiment = experiment_against(
            {"type": "pi0_remote", "policy_variant": "pi0", "openpi_embodiment_adapter": "droid"}, server,
            {"arena-plugin-openpi": ">=0.1"}, run="microwave_pi0", episodes=2, num_envs=1, max_episode_steps=12,
            environment={"type": "franka_kitchen", "task": "microwave", "image_height": 48, "image_width": 64},
        )
        result = arena_run(experiment, tmp_path / "out", env=OSMESA)
        requests = list(server.model.requests)
    records = collect_run_records(tmp_path / "out" / "microwave_pi0")
    assert [r.episode_index for r in records] == [0, 1]
    for record in records:
        assert record.error is None and record.outcome == "timeout" and record.steps == 12
        assert record.task == "microwave"
        assert record.latency["requests"] == 2  # pi0 replays 10 rows: steps 0 and 10 request
        assert record.server_timing["infer_ms_mean"] >= 0
    # The double validated every request (a rejected one would have made the episode an error).
    assert len(requests) == 4
    assert requests[0]["prompt"] == "open the microwave door"
    summary = json.loads((tmp_path / "out" / "experiment_result.json").read_text())
    assert "microwave_pi0" in json.dumps(summary)
    # Last: the records above are what this plugin owns; the exit code also covers the report.
    assert result.returncode == 0, result.stdout + result.stderr


def test_openpi_plugin_is_listed_with_what_it_registers():
    openpi = listed_plugin("openpi")
    assert openpi["distribution"] == "arena-plugin-openpi"
    assert openpi["registered"]["policies"] == ["pi0_remote"]
    assert openpi["registered"]["embodiment_adapters"] == ["openpi/aloha", "openpi/droid", "openpi/libero"]
    assert openpi["registered"]["server_tasks"] == ["pi0_remote"]


def test_experiment_requiring_openpi_fails_before_starting_when_it_is_not_installed(tmp_path, monkeypatch):
    """With the distribution absent, `requires:` names it (and how to install it) before any run."""
    from arena.config import load_experiment
    from arena.errors import ConfigError

    without_distribution(monkeypatch, "arena-plugin-openpi")
    with pytest.raises(ConfigError, match=r"arena-plugin-openpi>=0.1, which is not installed: pip install"):
        load_experiment(EXAMPLE)
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_example_validates_and_dry_runs(tmp_path):
    validated = arena("validate", str(EXAMPLE))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "2 run(s)" in validated.stdout
    dry = arena("run", str(EXAMPLE), "--dry-run", "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    out = dry.stdout
    for run in ("microwave_pi05", "kettle_pi05"):
        assert run in out
    assert "pi05_droid_jointpos_polaris" in out
    assert not (tmp_path / "out").exists()
