"""A NaN in an episode (a physics blow-up's reward) never makes the episode vanish: it is
written in one agreed form, read back, counted once with its outcome and flagged; every reader
(run_result.json, experiment_result.json, `--resume`, `arena status`, the report) agrees."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

from arena.outputs.records import EpisodeRecord, read_records


def test_non_finite_numbers_round_trip_in_the_agreed_form_and_are_flagged(tmp_path):
    record = EpisodeRecord(
        run="r", episode_index=3, seed=3, outcome="timeout", return_=math.nan,
        latency={"requests": 4, "mean_ms": math.inf, "max_ms": 2.0}, metrics={"coverage": 0.25, "near": True},
        non_finite=["metrics.coverage"],  # a step's value was NaN (left out of the reduction)
    )
    line = record.to_json()
    data = json.loads(line)  # valid JSON: no bare NaN
    assert data["return"] == "NaN" and data["latency"]["mean_ms"] == "Infinity" and data["metrics"]["near"] is True
    assert data["non_finite"] == ["latency.mean_ms", "metrics.coverage", "return"]
    (tmp_path / "episodes.jsonl").write_text(line + "\n" + EpisodeRecord(
        run="r", episode_index=4, seed=4, outcome="success", return_=-math.inf).to_json() + "\n")
    back, issues = read_records(tmp_path / "episodes.jsonl")
    assert issues == [] and [r.episode_index for r in back] == [3, 4]
    assert math.isnan(back[0].return_) and back[0].latency["mean_ms"] == math.inf and back[1].return_ == -math.inf
    assert back[0].non_finite == data["non_finite"] and back[1].non_finite == ["return"]


def _experiment(tmp_path: Path) -> Path:
    experiment = {"runs": {"reach": {
        "environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False, "max_steps": 5,
                        "nan_reward_seeds": [1], "nan_reward_step": 2},
        "policy": {"type": "random_action"},
        "environment_builder": {"num_envs": 2, "seed": 0},
        "rollout_limit": {"num_episodes": 4},
    }}}
    path = tmp_path / "nan.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def _arena(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)


def test_a_nan_reward_in_one_step_keeps_its_episode_counted_once_by_every_reader(tmp_path):
    out = tmp_path / "out"
    run = _arena(tmp_path, "run", str(_experiment(tmp_path)), "--output-dir", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "partial" not in run.stdout  # "partial: 3 of 4 episodes" before
    lines = [json.loads(line) for line in (out / "reach" / "episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    (nan,) = [r for r in lines if r["seed"] == 1]
    assert nan["return"] == "NaN" and nan["non_finite"] == ["return"] and nan["outcome"] in ("failure", "timeout", "success")
    records, issues = read_records(out / "reach" / "episodes.jsonl")
    assert issues == [] and len(records) == 4
    run_result = json.loads((out / "reach" / "run_result.json").read_text())
    assert run_result["episodes"] == 4 and sum(run_result["counts"].values()) == 4
    assert run_result["non_finite"] == [{"episode_index": 1, "seed": 1, "outcome": nan["outcome"], "fields": ["return"]}]
    assert any("non-finite" in w and "episode 1 (seed 1" in w for w in run_result["warnings"])
    experiment = json.loads((out / "experiment_result.json").read_text())["runs"]["reach"]
    assert experiment["episodes_recorded"] == 4 and experiment["partial"] is False
    assert experiment["counts"] == run_result["counts"] and experiment["non_finite"] == run_result["non_finite"]
    assert sum("non-finite" in w for w in experiment["warnings"]) == 1
    report = (out / "index.html").read_text()
    assert "non-finite values" in report and "episode 1 (seed 1" in report and "non-finite: return" in report
    resume = _arena(tmp_path, "run", "--resume", str(out))
    assert resume.returncode == 0 and "nothing to resume" in resume.stdout, resume.stdout + resume.stderr
    assert len((out / "reach" / "episodes.jsonl").read_text().splitlines()) == 4  # not run again
    status = _arena(tmp_path, "status", str(out))
    assert status.returncode == 0 and "4/4" in status.stdout, status.stdout
