"""examples/mixed_policies.yaml: openpi + GR00T + DreamZero runs validate and dry-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.config import load_experiment
from arena.errors import ConfigError
from arena.launch.planning import plan_servers
from arena.launch.submit import run_experiment

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mixed_policies.yaml"


def test_mixed_example_validates_with_one_derived_server_task_per_run():
    exp = load_experiment(EXAMPLE)
    assert {name: run.policy_type for name, run in exp.runs.items()} == {
        "microwave_pi05": "pi0_remote",
        "microwave_gr00t": "gr00t_remote",
        "microwave_dreamzero": "dreamzero_remote",
    }
    plans = plan_servers(exp)
    assert set(plans) == set(exp.runs) and all(p.task is not None and not p.external for p in plans.values())
    assert len({p.task.name for p in plans.values()}) == 3
    assert plans["microwave_gr00t"].task.readiness == "zmq-ping"
    assert not plans["microwave_dreamzero"].task.shareable
    assert exp.runs["microwave_dreamzero"].environment_builder.num_envs == 1


def test_mixed_example_dry_runs(tmp_path, capsys):
    exp = load_experiment(EXAMPLE)
    assert run_experiment(exp, output_dir=tmp_path / "out", dry_run=True) == 0
    text = capsys.readouterr().out
    for task in ("openpi-pi05-droid", "gr00t-oxe-droid", "dreamzero-droid"):
        assert f"server {task} for " in text
    assert not (tmp_path / "out").exists()


def test_scaling_the_dreamzero_run_with_envs_is_refused():
    with pytest.raises(ConfigError, match="microwave_dreamzero.*more runs or shards"):
        load_experiment(EXAMPLE, ["runs.microwave_dreamzero.environment_builder.num_envs=4"])
