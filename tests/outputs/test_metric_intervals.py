"""Episode-metric intervals stay inside the metric's range: Wilson for a boolean metric, the
betting interval for one with declared bounds, Student's t clipped at a one-sided bound (latency, a
return of non-negative rewards), Student's t otherwise — the same figures in
run_result.json, experiment_result.json, the report and what the result sinks are sent."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.outputs.metrics import betting_interval, metric_interval, summarize_metrics
from arena.outputs.run_stats import wilson_interval
from arena.sinks import experiment_metrics, rate_metrics


def test_a_boolean_metric_gets_the_success_rates_wilson_interval():
    # ManiSkill's is_grasped held in 1 of 3 episodes: Student's t gave [-1.10, 1.77]
    mean, low, high, method = metric_interval([True, False, False])
    assert method == "wilson" and mean == pytest.approx(1 / 3)
    assert (low, high) == wilson_interval(1, 3) and 0.0 < low < high < 1.0
    # 5 of 5: t gave [1.00, 1.00]
    _, low, high, _ = metric_interval([True] * 5)
    assert (low, high) == wilson_interval(5, 5) and high == 1.0 and low < 0.6


def test_a_bounded_metric_at_its_bound_has_an_interval_inside_it_and_of_nonzero_width():
    # the PushT expert's reward, 1 in every episode: t gave "1 [1, 1]"
    mean, low, high, method = metric_interval([1.0] * 5, (0.0, 1.0))
    assert method == "betting-bounded-mean" and mean == 1.0 and high == 1.0 and 0.0 < low < 0.5
    # zero-action PushT coverage, small and skewed: t reached below 0
    values = [0.0, 0.0, 0.31, 0.0, 0.02, 0.0, 0.03, 0.0, 0.01, 0.0]
    _, t_low, _, _ = metric_interval(values)
    assert t_low < 0.0
    _, low, high, method = metric_interval(values, (0.0, 1.0))
    assert method == "betting-bounded-mean" and 0.0 <= low < high <= 1.0
    # other bounds are rescaled: a metric in [-2, 3]
    _, low, high, _ = metric_interval([3.0] * 4, (-2.0, 3.0))
    assert -2.0 <= low < 3.0 and high == 3.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=60),
    st.tuples(st.floats(-5, 5), st.floats(0.01, 10)),
)
def test_bounded_intervals_hold_the_mean_inside_the_bounds_with_positive_width(unit_values, frame):
    lo, span = frame
    values = [lo + span * v for v in unit_values]
    mean, low, high, method = metric_interval(values, (lo, lo + span))
    assert method == "betting-bounded-mean"
    assert lo - 1e-9 <= low <= mean + 1e-9 and mean - 1e-9 <= high <= lo + span + 1e-9
    assert high - low > 0.0


def test_betting_interval_covers_at_the_stated_rate_on_a_skewed_bounded_variable():
    import numpy as np

    rng = np.random.default_rng(0)
    true_mean = 0.1 / 1.1  # Beta(0.1, 1): most values near 0, a few large ones
    misses = 0
    for _ in range(300):
        x = rng.beta(0.1, 1.0, size=15)
        low, high = betting_interval(x)
        misses += not (low <= true_mean <= high)
    assert misses / 300 <= 0.05  # valid for any distribution in the bounds (t misses more here)


def test_values_outside_declared_bounds_fall_back_to_t_and_no_bounds_keep_t():
    summary = summarize_metrics(
        [{"outcome": "success", "metrics": {"c": v, "d": v}} for v in (0.5, 1.5, 0.7)], {"c": (0.0, 1.0)}
    )
    assert summary["c"]["method"] == "student-t" and summary["c"]["bounds"] == [0.0, 1.0]
    assert summary["d"]["method"] == "student-t" and summary["d"]["bounds"] is None


def _experiment(tmp_path: Path, events: Path) -> Path:
    experiment = {
        "tracking": {"rec": {"type": "arena.testing.sinks:RecordingSink", "path": str(events)}},
        "runs": {"reach": {
            "environment": {"type": "arena.testing.envs:ToyReachEnv", "report_bounded": True, "cameras": False,
                            "max_steps": 8},
            "policy": {"type": "random_action"},
            "environment_builder": {"num_envs": 2, "seed": 3},
            "rollout_limit": {"num_episodes": 6},
        }},
    }
    path = tmp_path / "bounded.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def test_a_run_reports_boolean_and_bounded_metrics_inside_their_range_everywhere(tmp_path, monkeypatch):
    events = tmp_path / "events.jsonl"
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(_experiment(tmp_path, events)), "--output-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = [json.loads(line) for line in (out / "reach" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 6
    run_result = json.loads((out / "reach" / "run_result.json").read_text())["metrics"]
    near, progress = run_result["near"], run_result["progress"]
    k = sum(r["metrics"]["near"] for r in records)
    assert near["method"] == "wilson" and [near["ci_low"], near["ci_high"]] == list(wilson_interval(k, 6))
    assert progress["method"] == "betting-bounded-mean" and progress["bounds"] == [0.0, 1.0]
    assert 0.0 <= progress["ci_low"] <= progress["mean"] <= progress["ci_high"] <= 1.0
    assert progress["ci_high"] > progress["ci_low"]
    assert all(isinstance(r["metrics"]["near"], bool) for r in records)  # a boolean stays one in the record
    experiment = json.loads((out / "experiment_result.json").read_text())
    assert experiment["runs"]["reach"]["metrics"] == run_result  # every reader, the same figures
    assert "betting-bounded-mean" in experiment["methods"] and "student-t" in experiment["methods"]
    report = (out / "index.html").read_text()
    assert "betting-bounded-mean" in report and "Waudby-Smith" in report
    # what the sinks are sent (W&B and MLflow log rate_metrics / experiment_metrics of these)
    sent = [json.loads(line) for line in events.read_text().splitlines()]
    finished = next(e for e in sent if e["event"] == "run_finished")["result"]
    assert finished["metrics"] == run_result
    assert rate_metrics(finished)["metrics/progress/ci95_low"] == progress["ci_low"]
    logged = experiment_metrics(next(e for e in sent if e["event"] == "experiment_finished")["result"])
    assert logged["reach/metrics/near/ci95_high"] == near["ci_high"]
    assert logged["reach/metrics/progress/mean"] == progress["mean"]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("WANDB_SILENT", "true")
    _mlflow_receives(tmp_path, out, experiment, near, progress)
    _wandb_receives(tmp_path, out, experiment, progress)


def _context(out: Path, role: str):
    from arena.sinks import SinkContext

    return SinkContext(experiment="bounded", output_dir=out, group="bounded-0", role=role)


def _mlflow_receives(tmp_path: Path, out: Path, experiment: dict, near: dict, progress: dict) -> None:
    """The real MLflow sink (SQLite store) fed this run's results logs the same figures."""
    if importlib.util.find_spec("arena_mlflow") is None or importlib.util.find_spec("mlflow") is None:
        return
    from arena_mlflow.sink import MlflowConfig, MlflowSink
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()  # MLflow's file store: seconds, where a new SQLite store takes ~15
    config = MlflowConfig(tracking_uri=uri, experiment_name="bounded", max_videos=0,
                          artifact_location=(tmp_path / "artifacts").as_uri())
    sink = MlflowSink(config, _context(out, "experiment"))
    sink.experiment_finished(experiment, None, [])
    sink.close()
    (parent,) = MlflowClient(tracking_uri=uri).search_runs([sink.experiment_id])
    assert parent.data.metrics["reach/metrics/progress/ci95_low"] == pytest.approx(progress["ci_low"])
    assert parent.data.metrics["reach/metrics/near/ci95_high"] == pytest.approx(near["ci_high"])


def _wandb_receives(tmp_path: Path, out: Path, experiment: dict, progress: dict) -> None:
    """The real W&B sink (offline, read back) fed this run's results logs the same figures."""
    if importlib.util.find_spec("arena_wandb") is None or importlib.util.find_spec("wandb") is None:
        return
    from arena_wandb.offline import wait_for_runs
    from arena_wandb.sink import WandbConfig, WandbSink

    sink = WandbSink(WandbConfig(project="bounded", mode="offline", dir=str(tmp_path / "wb"), max_videos=0),
                     _context(out, "experiment"))
    sink.experiment_finished(experiment, None, [])
    sink.close()
    (run,) = wait_for_runs(tmp_path / "wb" / "wandb", 1)
    assert run.summary["reach/metrics/progress/ci95_low"] == pytest.approx(progress["ci_low"])
    assert run.summary["reach/metrics/progress/mean"] == pytest.approx(progress["mean"])


# -- one-sided bounds: latency, control rate, a return of non-negative rewards ------------------


def test_a_metric_bounded_below_gets_t_clipped_at_the_bound():
    # three episodes' p50 latency (ms), one slow: plain t reaches below 0 ms
    latency = [12.0, 15.0, 140.0]
    mean, t_low, t_high, method = metric_interval(latency)
    assert method == "student-t" and t_low < 0.0
    clipped = metric_interval(latency, (0.0, None))
    assert clipped == (mean, 0.0, t_high, "student-t-clipped")
    # a bound the t interval does not reach leaves it as it is (same figures, named as clipped)
    tight = [100.0, 101.0, 102.0, 103.0]
    assert metric_interval(tight, (0.0, None))[1:3] == metric_interval(tight)[1:3]
    # a bound above: mirrored
    _, low, high, method = metric_interval([-12.0, -15.0, -140.0], (None, 0.0))
    assert method == "student-t-clipped" and high == 0.0 and low == pytest.approx(-t_high)
    # one episode: no interval either way
    assert metric_interval([3.0], (0.0, None)) == (3.0, None, None, "student-t-clipped")
    # a value past the bound: the declaration is wrong, so plain t (not hidden by clipping)
    assert metric_interval([-1.0, 5.0, 9.0], (0.0, None))[3] == "student-t"


def test_clipping_keeps_the_t_intervals_coverage():
    import numpy as np

    rng = np.random.default_rng(1)
    true_mean = 1.0  # exponential latencies, skewed: t often reaches below 0 at n = 4
    crossed = plain_hits = clipped_hits = 0
    for _ in range(200):
        x = list(rng.exponential(true_mean, size=4))
        _, t_low, t_high, _ = metric_interval(x)
        _, low, high, _ = metric_interval(x, (0.0, None))
        crossed += t_low < 0.0
        assert low >= 0.0 and high == t_high
        plain_hits += t_low <= true_mean <= t_high
        clipped_hits += low <= true_mean <= high
    assert crossed > 20 and clipped_hits == plain_hits


def test_one_sided_bounds_are_checked_and_infinity_reads_as_none():
    from arena.outputs.metrics import check_bounds

    assert check_bounds({"a": (0, None), "b": (float("-inf"), 3), "c": [0.0, float("inf")]}, "env x") == {
        "a": (0.0, None), "b": (None, 3.0), "c": (0.0, None),
    }
    for bad in ((None, None), (float("nan"), None), (2.0, 1.0), (0.0,)):
        with pytest.raises(ValueError, match="env x"):
            check_bounds({"k": bad}, "env x")


def test_live_metrics_have_bounds_without_the_environment_declaring_them():
    from arena.live.episode_stats import LIVE_METRIC_BOUNDS, LIVE_METRICS

    assert set(LIVE_METRIC_BOUNDS) == set(LIVE_METRICS)
    rows = [{"live_latency_p50_ms": v, "live_stale_ratio": s, "live_control_hz": h}
            for v, s, h in ((8.0, 0.0, 9.5), (9.0, 0.25, 9.9), (95.0, 0.5, 3.0))]
    summary = summarize_metrics([{"outcome": "failure", "metrics": m} for m in rows])
    latency = summary["live_latency_p50_ms"]
    assert latency["method"] == "student-t-clipped" and latency["bounds"] == [0.0, None]
    assert latency["ci_low"] == 0.0 < latency["mean"] < latency["ci_high"]
    assert json.loads(json.dumps(latency)) == latency  # plain JSON: null, not Infinity
    stale = summary["live_stale_ratio"]
    assert stale["method"] == "betting-bounded-mean" and 0.0 <= stale["ci_low"] < stale["ci_high"] <= 1.0
    assert summary["live_control_hz"]["ci_low"] >= 0.0
    # an environment's declaration of the same key wins; JSON pairs with null read back
    mine = summarize_metrics([{"outcome": "failure", "metrics": m} for m in rows], {"live_latency_p50_ms": [None, 500]})
    mine = mine["live_latency_p50_ms"]
    assert mine["method"] == "student-t-clipped" and mine["bounds"] == [None, 500.0] and mine["ci_low"] < 0.0


def test_returns_use_the_bounds_declared_for_return():
    from arena.outputs.metrics import RETURN_KEY, summarize_returns

    records = [{"outcome": o, "return": r} for o, r in (("success", 40.0), ("failure", 0.5), ("failure", 1.0),
                                                         ("error", -99.0))]
    plain = summarize_returns(records)
    assert plain["method"] == "student-t" and plain["ci_low"] < 0.0 and plain["episodes"] == 3
    bounded = summarize_returns(records, {RETURN_KEY: [0.0, None], "reward": [0.0, 1.0]})
    assert bounded["ci_low"] == 0.0 and bounded["ci_high"] == plain["ci_high"] and bounded["mean"] == plain["mean"]
    assert bounded["method"] == "student-t-clipped" and bounded["bounds"] == [0.0, None]
    assert summarize_returns([{"outcome": "error", "return": 1.0}]) is None
