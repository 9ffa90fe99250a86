"""The wandb sink, for real: W&B in offline mode through `arena run`, its run files read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.testing.experiments import run_tiny_experiment, tiny_experiment
from arena_wandb.offline import read_offline_run, wait_for_runs

pytest.importorskip("wandb")


def _experiment(wandb_dir: Path, **options) -> dict:
    exp = tiny_experiment({"type": "random_action"}, episodes=3, max_episode_steps=8, run="reach",
                          recording={"enabled": True, "max_episodes": 1})
    exp["tracking"] = {"step": 1200, "wandb": {"project": "arena-test", "mode": "offline", "dir": str(wandb_dir), **options}}
    return exp


def test_per_run_logs_each_run_and_the_experiment_offline(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb_dir = tmp_path / "wb"
    outcome = run_tiny_experiment(_experiment(wandb_dir, per="run"), tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    runs = {r.job_type: r for r in wait_for_runs(wandb_dir / "wandb", 2)}
    assert set(runs) == {"arena-run", "arena-experiment"}, runs
    expected = outcome.result["runs"]["reach"]
    run, exp = runs["arena-run"], runs["arena-experiment"]
    # tracking.step and no series: the default series, the experiment's name (one curve per loop)
    assert run.name == "out-experiment/reach" and exp.name == "out-experiment"
    assert run.group == exp.group == "out-experiment"
    assert run.finished and exp.finished
    # the run's own numbers, at the checkpoint's step
    assert run.summary["success_rate"] == pytest.approx(expected["success_rate"])
    assert run.summary["n"] == expected["n"] and run.summary["checkpoint_step"] == 1200
    assert [row["ci95_low"] for row in run.history if "ci95_low" in row] == [pytest.approx(expected["ci95"][0])]
    assert run.summary["episodes"]["nrows"] == 3
    # the experiment's: per run and the policy under evaluation (the only run), never pooled;
    # the config, the report and a video
    assert exp.summary["evaluated/success_rate"] == pytest.approx(expected["success_rate"])
    assert not [k for k in exp.summary if k.startswith("overall/")]
    assert exp.summary["reach/ci95_high"] == pytest.approx(expected["ci95"][1])
    assert exp.config["arena"]["experiment"]["runs"]["reach"]["policy"]["type"] == "random_action"
    assert exp.config["arena"]["step"] == 1200
    kinds = {a["type"]: a["files"] for a in exp.artifacts}
    assert kinds["arena-report"] == ["index.html"]
    assert len(kinds["arena-videos"]) == 1 and kinds["arena-videos"][0].startswith("videos/reach/videos/")


def test_per_experiment_is_one_run_with_the_episode_table(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb_dir = tmp_path / "wb"
    outcome = run_tiny_experiment(_experiment(wandb_dir, max_videos=0), tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    (only,) = wait_for_runs(wandb_dir / "wandb", 1)
    assert only.job_type == "arena-experiment" and only.summary["episodes"]["nrows"] == 3
    assert only.summary["reach/n"] == outcome.result["runs"]["reach"]["n"]
    assert {a["type"] for a in only.artifacts} >= {"arena-report"} and "arena-videos" not in {a["type"] for a in only.artifacts}


def test_a_file_that_is_not_a_wandb_log_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run-x.wandb").write_bytes(b"nope")
    with pytest.raises(ValueError, match="not a W&B transaction log"):
        read_offline_run(tmp_path)
