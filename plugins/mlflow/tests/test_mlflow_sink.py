"""The mlflow sink, for real: a local SQLite store written through `arena run`, read back with MlflowClient."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.testing.experiments import run_tiny_experiment, tiny_experiment

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402


def _experiment(tmp_path: Path, **options) -> tuple[dict, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp = tiny_experiment({"type": "random_action"}, episodes=3, max_episode_steps=8, run="reach",
                          recording={"enabled": True, "max_episodes": 1})
    exp["tracking"] = {"step": 1200, "mlflow": {"tracking_uri": uri, "artifact_location": (tmp_path / "artifacts").as_uri(),
                                                 "experiment_name": "arena-test", **options}}
    return exp, uri


def test_per_run_logs_a_parent_and_a_child_run(tmp_path: Path) -> None:
    exp, uri = _experiment(tmp_path, per="run")
    outcome = run_tiny_experiment(exp, tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("arena-test")
    runs = {r.data.tags["arena.role"]: r for r in client.search_runs([experiment.experiment_id])}
    # tracking.step without a series: the default series (the experiment's name) holds the parent
    assert set(runs) == {"series", "experiment", "run"}
    parent, child, series = runs["experiment"], runs["run"], runs["series"]
    assert parent.data.tags["mlflow.parentRunId"] == series.info.run_id and series.info.run_name == "out-experiment"
    assert series.info.status == "FINISHED"  # ended with its evaluation
    expected = outcome.result["runs"]["reach"]
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert child.data.tags["arena.group"] == parent.data.tags["arena.group"]
    assert child.info.run_name == "out-experiment/reach/step1200" and parent.info.run_name == "out-experiment/step1200"
    assert child.info.status == "FINISHED" and parent.info.status == "FINISHED"
    assert child.data.params["policy.type"] == "random_action" and child.data.params["tracking.step"] == "1200"
    assert child.data.metrics["success_rate"] == pytest.approx(expected["success_rate"])
    assert child.data.metrics["n"] == expected["n"]
    history = client.get_metric_history(child.info.run_id, "success_rate")
    assert [m.step for m in history] == [1200]
    # "step" is the training step only: no metric is stepped by episode index
    assert all(m.step == 1200 for key in child.data.metrics for m in client.get_metric_history(child.info.run_id, key))
    assert parent.data.metrics["evaluated/success_rate"] == pytest.approx(expected["success_rate"])
    assert not [k for k in parent.data.metrics if k.startswith("overall/")]
    assert "reach/return/mean" in parent.data.metrics and "reach/return/ci95_low" in parent.data.metrics
    assert parent.data.metrics["reach/ci95_high"] == pytest.approx(expected["ci95"][1])
    assert parent.data.params["runs.reach.policy.type"] == "random_action"
    assert parent.data.params["tracking.step"] == "1200"
    files = {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {"index.html", "experiment.yaml", "provenance.json", "videos"} <= files
    videos = client.list_artifacts(parent.info.run_id, "videos/reach/videos")
    assert len(videos) == 1
    assert {f.path for f in client.list_artifacts(child.info.run_id)} == {"episodes.json"}


def test_per_experiment_is_one_run_with_every_episode(tmp_path: Path) -> None:
    import json

    exp, uri = _experiment(tmp_path, max_videos=0)
    outcome = run_tiny_experiment(exp, tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("arena-test").experiment_id])
    (only,) = [r for r in runs if r.data.tags["arena.role"] != "series"]  # beside the default series
    assert only.data.tags["arena.role"] == "experiment" and only.data.metrics["reach/n"] == outcome.result["runs"]["reach"]["n"]
    local = client.download_artifacts(only.info.run_id, "episodes.json", str(tmp_path))
    episodes = json.loads(Path(local).read_text())["episodes"]
    assert [e["outcome"] for e in episodes] == [r["outcome"] for r in outcome.episodes("reach")]
    assert "videos" not in {f.path for f in client.list_artifacts(only.info.run_id)}
