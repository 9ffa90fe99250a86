"""Episode metrics: the reductions, the t interval, and a user's run recording them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.outputs.metrics import (
    REDUCTIONS,
    EpisodeMetrics,
    check_declaration,
    declared_metrics,
    step_values,
    summarize_metrics,
    t_quantile_975,
)
from arena.testing.envs import ToyReachConfig, ToyReachEnv

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40), st.sampled_from(REDUCTIONS))
def test_each_reduction_equals_numpys_over_the_episode(values, reduction):
    acc = EpisodeMetrics({"m": reduction})
    for v in values:
        acc.add("m", v)
    expected = {"max": np.max, "min": np.min, "last": lambda x: x[-1], "mean": np.mean}[reduction](np.array(values))
    assert acc.result()["m"] == pytest.approx(float(expected), rel=1e-9, abs=1e-6)


def test_missing_and_non_finite_steps_add_nothing_and_undeclared_keys_are_ignored():
    acc = EpisodeMetrics({"coverage": "max", "dist": "mean"})
    for v in (0.2, math.nan, 0.7, math.inf, 0.4):
        acc.add("coverage", v)
    acc.add("other", 5.0)
    assert acc.result() == {"coverage": 0.7}  # "dist" never came: no value, not 0
    assert acc.non_finite == ["coverage"]  # flagged for the record, never silently dropped


def test_bad_declarations_name_the_environment_and_the_key():
    with pytest.raises(ValueError, match=r"environment pusht: episode metric 'coverage' has reduction 'median'"):
        check_declaration({"coverage": "median"}, "environment pusht")
    with pytest.raises(ValueError, match="non-empty strings"):
        check_declaration({"": "max"}, "environment x")


def test_t_quantiles_match_the_table_and_approach_the_normal():
    assert t_quantile_975(1) == pytest.approx(12.7062, abs=1e-4)  # values of any t table
    assert t_quantile_975(9) == pytest.approx(2.2622, abs=1e-4)
    assert t_quantile_975(30) == pytest.approx(2.0423, abs=1e-4)
    assert t_quantile_975(50) == pytest.approx(2.0086, abs=2e-4)  # tabulated 2.0086
    assert t_quantile_975(100) == pytest.approx(1.9840, abs=2e-4)  # tabulated 1.9840
    assert 1.96 < t_quantile_975(10_000) < 1.961
    qs = [t_quantile_975(d) for d in range(1, 500)]
    assert all(a >= b for a, b in zip(qs, qs[1:]))  # decreasing in the degrees of freedom
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_summary_skips_error_episodes_and_gives_the_t_interval():
    records = [{"outcome": "success", "metrics": {"c": v}} for v in (0.9, 1.0, 0.8, 0.7)]
    records += [{"outcome": "error", "metrics": {"c": 0.0}}, {"outcome": "timeout"}]
    s = summarize_metrics(records)["c"]
    xs = np.array([0.9, 1.0, 0.8, 0.7])
    half = 3.1824 * xs.std(ddof=1) / 2
    assert s["episodes"] == 4 and s["mean"] == pytest.approx(0.85)
    assert (s["ci_low"], s["ci_high"]) == (pytest.approx(0.85 - half, abs=1e-5), pytest.approx(0.85 + half, abs=1e-5))
    assert s["method"] == "student-t" and s["bounds"] is None  # no bounds declared
    one = summarize_metrics([{"outcome": "failure", "metrics": {"c": 0.3}}])["c"]
    assert one == {"mean": 0.3, "ci_low": None, "ci_high": None, "episodes": 1, "method": "student-t", "bounds": None}
    assert summarize_metrics([{"outcome": "success"}]) is None


def test_step_values_keep_only_per_env_columns():
    info = {"a": np.array([1, 0, 1], bool), "b": 3.0, "c": np.zeros((3, 2)), "success": np.ones(3, bool)}
    out = step_values(info, {"a": "max", "b": "max", "c": "max", "d": "max"}, 3)
    assert list(out) == ["a"] and out["a"].dtype == np.bool_  # a boolean metric stays one


def test_declared_metrics_follow_the_config():
    assert declared_metrics(ToyReachEnv(ToyReachConfig(), num_envs=1)) == {}
    assert declared_metrics(ToyReachEnv(ToyReachConfig(report_distance=True), num_envs=1)) == {"distance": "min"}


def _run(tmp_path: Path, name: str, workers: int) -> Path:
    experiment = {
        "runs": {
            "reach": {
                "environment": {"type": "arena.testing.envs:ToyReachEnv", "report_distance": True, "cameras": False,
                                "workers": workers, "max_steps": 6},
                "policy": {"type": "random_action"},
                "environment_builder": {"num_envs": 2, "seed": 11},
                "rollout_limit": {"num_episodes": 5},
            }
        }
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reach: distance" in proc.stdout and "(mean over 5 episodes, student-t)" in proc.stdout, proc.stdout
    return out


def test_a_run_records_each_episodes_metric_and_its_summary_the_same_over_workers(tmp_path):
    outs = [_run(tmp_path, "inproc", 0), _run(tmp_path, "workers", 2)]
    by_seed = []
    for out in outs:
        records = [json.loads(line) for line in (out / "reach" / "episodes.jsonl").read_text().splitlines()]
        assert len(records) == 5
        for r in records:
            # the closest approach can never exceed where the episode started
            assert 0 <= r["metrics"]["distance"] <= r["env_extras"]["start_distance"] + 1e-6
        by_seed.append({r["seed"]: r["metrics"]["distance"] for r in records})
        result = json.loads((out / "reach" / "run_result.json").read_text())
        summary = result["metrics"]["distance"]
        values = [r["metrics"]["distance"] for r in records]
        assert summary["episodes"] == 5 and summary["mean"] == pytest.approx(float(np.mean(values)))
        assert summary["ci_low"] < summary["mean"] < summary["ci_high"]
        experiment = json.loads((out / "experiment_result.json").read_text())
        assert experiment["runs"]["reach"]["metrics"] == result["metrics"]
        report = (out / "index.html").read_text()
        assert "Episode metrics" in report and "distance" in report
    assert by_seed[0] == by_seed[1]  # per-episode values do not depend on the worker layout
