"""`arena run --resume OUTPUT_DIR`: an experiment killed with SIGKILL finishes with the same outcomes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from arena.cli import app
from arena.launch.submit import remaining_work, resume_experiment
from arena.outputs.records import EpisodeRecord, RecordWriter, read_records
from arena.rollout.run_one import run_one

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "rollout"
if str(FAKES) not in sys.path:  # the runs name their env and policy as rollout_fakes:Class
    sys.path.insert(0, str(FAKES))

from rollout_fakes import count_lines, fakes_env  # noqa: E402 - importable once FAKES is on the path


def _experiment(tmp_path: Path, step_delay_s: float) -> Path:
    env = {"type": "rollout_fakes:CounterEnv"}
    data = {
        "launch": {"backend": "local", "local": {"jobs": 2}},
        "shared": {"environment_builder": {"num_envs": 2, "seed": 100}, "policy": {"type": "rollout_fakes:CoinFlipPolicy"}},
        "runs": {
            "first": {"environment": env, "rollout_limit": {"num_episodes": 6}},
            "second": {"environment": {**env, "step_delay_s": step_delay_s}, "rollout_limit": {"num_episodes": 16}},
        },
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _arena(*args, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, timeout=timeout, env=fakes_env(), cwd=ROOT
    )


def _outcomes(out: Path, run: str) -> dict[int, str]:
    records, _ = read_records(out / run / "episodes.jsonl")
    return {r.episode_index: r.outcome for r in records}


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_the_outcomes_of_an_uninterrupted_run(tmp_path):
    out = tmp_path / "killed"
    path = _experiment(tmp_path, 0.08)
    proc = subprocess.Popen(
        # opted in once, here: the resume below inherits it through the snapshot's allow_imports
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), "--allow-import", "rollout_fakes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=fakes_env(), cwd=ROOT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        # kill once the first run is done and the second is part-way
        while count_lines(out / "second" / "episodes.jsonl") < 3 or not (out / "first" / "run_result.json").exists():
            assert proc.poll() is None, "the run finished before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the runner and everything it started, as a node dies
        proc.wait()
    interrupted = _outcomes(out, "second")
    assert 3 <= len(interrupted) < 16
    first_mtime = (out / "first" / "episodes.jsonl").stat().st_mtime_ns

    resumed = _arena("run", "--resume", out)
    assert resumed.returncode in (0, 3), resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "resuming" in resumed.stdout and "second" in resumed.stdout
    assert (out / "first" / "episodes.jsonl").stat().st_mtime_ns == first_mtime  # a finished run is not rerun

    reference = tmp_path / "reference"  # the same snapshot, uninterrupted (in-process, same seeds)
    for run in ("first", "second"):
        assert run_one(out / "experiment.yaml", run, reference) in (0, 3)
        assert _outcomes(out, run) == _outcomes(reference, run), run
    # episodes finished before the kill were not run again
    records, _ = read_records(out / "second" / "episodes.jsonl")
    assert sorted(r.episode_index for r in records) == list(range(16))
    result = json.loads((out / "experiment_result.json").read_text())
    assert result["runs"]["second"]["state"] == "completed"
    assert result["runs"]["second"]["episodes_recorded"] == 16
    assert json.loads((out / "provenance.json").read_text())["resumes"]
    assert (out / "index.html").exists()


def _write(path: Path, outcomes: dict[int, str]) -> None:
    with RecordWriter(path) as writer:
        for index, outcome in outcomes.items():
            writer.write(EpisodeRecord(run=path.parent.name, episode_index=index, seed=index, outcome=outcome,
                                       error="boom" if outcome == "error" else None))


def test_resume_retries_error_episodes_unless_they_are_kept(tmp_path):
    manifest = {
        "experiment": "x",
        "runs": {
            "a": {"work_items": [{"run": "a", "episode_index": i, "seed": i} for i in range(4)]},
            "b": {"work_items": [{"run": "b", "episode_index": i, "seed": i} for i in range(2)]},
        },
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    _write(tmp_path / "a" / "episodes.jsonl", {0: "success", 1: "error", 3: "timeout"})
    _write(tmp_path / "b" / "episodes.jsonl", {0: "failure", 1: "success"})
    assert remaining_work(tmp_path) == {"a": [1, 2], "b": []}
    assert remaining_work(tmp_path, keep_errors=True) == {"a": [2], "b": []}


def test_resume_of_a_finished_experiment_runs_nothing_and_rebuilds_the_report(tmp_path):
    from arena.config import load_experiment, write_snapshot
    from arena.rollout.workitems import write_manifest

    out = tmp_path / "out"
    out.mkdir()
    experiment = load_experiment(_experiment(tmp_path, 0.0), allow_imports=["rollout_fakes"])
    write_snapshot(experiment, out / "experiment.yaml")
    write_manifest(experiment, out)
    for run in experiment.runs:
        assert run_one(out / "experiment.yaml", run, out) in (0, 3)
    assert resume_experiment(out) in (0, 3)
    assert (out / "index.html").exists()
    assert not (out / "submission.json").exists()  # no backend was started


def test_resume_refuses_a_directory_that_is_not_an_output_directory(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "experiment.yaml" in result.output
    result = runner.invoke(app, ["run", "x.yaml", "--keep-errors"])
    assert result.exit_code == 2 and "--resume" in result.output


def test_running_into_an_earlier_output_directory_points_at_resume(tmp_path):
    """A non-empty --output-dir that holds an experiment: the error names `arena run --resume`."""
    exp = _experiment(tmp_path, step_delay_s=0.0)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "experiment.yaml").write_text("runs: {}\n")
    (earlier / "manifest.json").write_text("{}")
    result = CliRunner().invoke(app, ["run", str(exp), "--output-dir", str(earlier), "--allow-import", "rollout_fakes"])
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "is not empty" in message and f"arena run --resume {earlier}" in message
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["run", str(exp), "--output-dir", str(other), "--allow-import", "rollout_fakes"])
    assert result.exit_code == 2 and "is not empty" in result.output and "--resume" not in result.output


def test_resume_may_run_more_runs_at_once_with_jobs(tmp_path):
    out = tmp_path / "out"
    done = _arena("run", _experiment(tmp_path, 0.0), "--output-dir", out, "--allow-import", "rollout_fakes")
    assert done.returncode in (0, 3), done.stderr[-2000:]
    before = {run: _outcomes(out, run) for run in ("first", "second")}
    for run in ("first", "second"):  # as if both runs had been interrupted after 2 episodes
        records, _ = read_records(out / run / "episodes.jsonl")
        (out / run / "episodes.jsonl").unlink()
        _write(out / run / "episodes.jsonl", {r.episode_index: r.outcome for r in records[:2]})
    resumed = _arena("run", "--resume", out, "--jobs", "2")
    assert resumed.returncode in (0, 3), resumed.stdout[-2000:] + resumed.stderr[-2000:]
    progress = [line for line in resumed.stdout.splitlines() if line.startswith("[arena]")]
    assert progress and "runs 0/2 finished" in progress[0], progress  # not how the earlier attempt ended
    assert {run: _outcomes(out, run) for run in ("first", "second")} == before
    refused = _arena("run", "--resume", out, "--backend", "local")
    assert refused.returncode == 2 and "but --jobs" in " ".join(refused.stderr.split())
