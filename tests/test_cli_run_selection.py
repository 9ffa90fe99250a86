"""`arena run EXPERIMENT --run NAME`: only some of an experiment's runs, into the output a full
run would use; `--resume` runs the rest later without touching what is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from arena.cli import app
from arena.config import load_experiment
from arena.config.selection import select_runs
from arena.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "rollout"
if str(FAKES) not in sys.path:  # the runs name their env and policy as rollout_fakes:Class
    sys.path.insert(0, str(FAKES))

from rollout_fakes import expected_outcome, fakes_env  # noqa: E402 - importable once FAKES is on the path

#: Each run its own seeds, so a record (or a rate) of one run could never pass for another's.
SEEDS = {"first": 0, "second": 100, "third": 200}
EPISODES = 4


def _experiment(tmp_path: Path, roles: dict[str, str] | None = None) -> Path:
    data = {
        "name": "selection",
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {"environment": {"type": "rollout_fakes:CounterEnv"}, "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
                   "rollout_limit": {"num_episodes": EPISODES}},
        "runs": {name: {"environment_builder": {"num_envs": 2, "seed": seed},
                        **({"role": roles[name]} if name in (roles or {}) else {})}
                 for name, seed in SEEDS.items()},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _arena(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, timeout=180,
                          env=fakes_env(), cwd=ROOT)


def _records(out: Path, run: str) -> list[dict]:
    path = out / run / "episodes.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _assert_measured(out: Path, run: str, result: dict) -> None:
    """``run``'s records are its own planned episodes with their known outcomes, and its numbers are theirs."""
    planned = json.loads((out / "manifest.json").read_text())["runs"][run]["work_items"]
    records = sorted(_records(out, run), key=lambda r: r["episode_index"])
    assert [(r["run"], r["episode_index"], r["seed"]) for r in records] == [
        (run, w["episode_index"], w["seed"]) for w in planned
    ]
    assert [r["outcome"] for r in records] == [expected_outcome(r["seed"]) for r in records]
    entry = result["runs"][run]
    assert entry["state"] == "completed"
    assert (entry["n"], entry["k"]) == (EPISODES, sum(r["outcome"] == "success" for r in records))


def _files(out: Path, run: str) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / run).rglob("*")) if p.is_file()}


def test_an_unknown_run_is_a_usage_error_naming_the_file_and_the_runs(tmp_path):
    path = _experiment(tmp_path)
    result = CliRunner().invoke(app, ["run", str(path), "--run", "second", "--run", "fourth",
                                      "--output-dir", str(tmp_path / "out"), "--allow-import", "rollout_fakes"])
    assert result.exit_code == 2, result.output
    assert str(path) in result.output and "'fourth'" in result.output
    assert "first, second, third" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_matrix_runs_are_selected_by_name_parent_or_glob(tmp_path):
    data = {
        "shared": {"environment": {"type": "rollout_fakes:CounterEnv"}, "policy": {"type": "rollout_fakes:CoinFlipPolicy"}},
        "matrix": {"runs": ["eval"], "axes": {
            "ckpt": {"key": "environment_builder.seed", "values": {"s1": 1, "s2": 2}},
            "task": {"key": "environment.task", "values": ["a", "b"]},
        }},
        "runs": {"eval": {}, "baseline": {}},
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    exp = load_experiment(path, allow_imports=["rollout_fakes"])
    assert list(exp.runs) == ["eval.s1-a", "eval.s1-b", "eval.s2-a", "eval.s2-b", "baseline"]
    assert select_runs(exp.runs, ["eval.s2-*"]) == ["eval.s2-a", "eval.s2-b"]
    assert select_runs(exp.runs, ["baseline", "eval"]) == [*list(exp.runs)[:4], "baseline"]  # experiment order
    assert select_runs(exp.runs, ["eval.s1-b", "*-b"]) == ["eval.s1-b", "eval.s2-b"]
    with pytest.raises(ConfigError, match="'eval.s3-\\*' selects no run.*eval.s1-a, eval.s1-b"):
        select_runs(exp.runs, ["eval.s3-*"], source=str(path))
    # the plan holds only what was selected: the dry-run lists those runs and no other
    dry = CliRunner().invoke(app, ["run", str(path), "--run", "eval.s2-*", "--dry-run", "--allow-import", "rollout_fakes"])
    assert dry.exit_code == 0, dry.output
    assert "eval.s2-a" in dry.output and "eval.s2-b" in dry.output
    assert "eval.s1-" not in dry.output and "baseline" not in dry.output


def test_slurm_plans_only_the_selected_run_and_its_shards(tmp_path, monkeypatch):
    import tempfile

    pytest.importorskip("arena_slurm")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the dry-run's scripts go to a temporary directory
    path = _experiment(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["launch"] = {"backend": "slurm", "slurm": {"shards": {"first": 2, "second": 2}}}  # names a run left out
    path.write_text(yaml.safe_dump(data))
    dry = CliRunner().invoke(app, ["run", str(path), "--run", "second", "--dry-run", "--allow-import", "rollout_fakes"])
    assert dry.exit_code == 0, dry.output
    assert "1 of 3 runs selected" in dry.output
    scripts = sorted(p.name for p in tmp_path.glob("arena-dry-run-*/*.sbatch"))
    assert scripts == ["collect.sbatch", "second.sbatch"]
    assert "--array=0-1" in (next(tmp_path.glob("arena-dry-run-*/second.sbatch"))).read_text()


@pytest.mark.slow  # three arena processes, each starting its runners: about 12 s
def test_selected_runs_then_resume_runs_only_the_rest_and_leaves_records_alone(tmp_path):
    path = _experiment(tmp_path)
    out = tmp_path / "out"
    done = _arena("run", path, "--run", "second", "--output-dir", out, "--allow-import", "rollout_fakes")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 of 3 run(s) selected (second)" in done.stdout
    assert f"not run (no records yet): first, third; run them with: arena run --resume {out}" in done.stdout
    result = json.loads((out / "experiment_result.json").read_text())
    assert list(result["runs"]) == ["first", "second", "third"]  # the output a full run would have
    _assert_measured(out, "second", result)
    for left in ("first", "third"):  # listed, marked, and without a number of their own
        entry = result["runs"][left]
        assert (entry["state"], entry["n"], entry["episodes_recorded"], entry["success_rate"]) == ("pending", 0, 0, None)
        assert entry["partial_note"] == f"partial: pending, 0 of {EPISODES} episodes"
        assert not _records(out, left)
    assert result["overall"]["n"] == EPISODES  # pooled over the recorded run only
    report = (out / "index.html").read_text()
    assert "pending" in report
    second = _files(out, "second")
    # running another run into the same directory is a resume of it: said so, nothing written
    taken = CliRunner().invoke(app, ["run", str(path), "--run", "first", "--output-dir", str(out),
                                     "--allow-import", "rollout_fakes"])
    assert taken.exit_code == 2 and f"arena run --resume {out} --run first" in " ".join(taken.output.split())
    assert _files(out, "second") == second and not (out / "first").exists()

    # --run with --resume: only the selected run's work; the other run's files stay byte for byte
    more = _arena("run", "--resume", out, "--run", "first")
    assert more.returncode == 0, more.stdout[-3000:] + more.stderr[-3000:]
    assert "1 run(s): first" in more.stdout
    assert _files(out, "second") == second
    assert not (out / "third").exists() or not _records(out, "third")
    first = _files(out, "first")
    middle = json.loads((out / "experiment_result.json").read_text())  # every run with records, the other pending
    _assert_measured(out, "first", middle)
    _assert_measured(out, "second", middle)
    assert (middle["runs"]["third"]["state"], middle["runs"]["third"]["success_rate"]) == ("pending", None)

    # a plain resume finishes the experiment: the one run never started, and nothing else
    rest = _arena("run", "--resume", out)
    assert rest.returncode == 0, rest.stdout[-3000:] + rest.stderr[-3000:]
    assert "1 run(s): third" in rest.stdout
    assert _files(out, "second") == second and _files(out, "first") == first
    final = json.loads((out / "experiment_result.json").read_text())
    for run in SEEDS:
        _assert_measured(out, run, final)
    assert final["overall"]["states"] == {"completed": 3}

    again = CliRunner().invoke(app, ["run", "--resume", str(out), "--run", "second"])  # nothing left: says so, exit 0
    assert again.exit_code == 0 and "every work item of second has a finished record" in again.output
    unknown = CliRunner().invoke(app, ["run", "--resume", str(out), "--run", "fourth"])
    assert unknown.exit_code == 2 and "first, second, third" in unknown.output and "experiment.yaml" in unknown.output
    assert _files(out, "second") == second and _files(out, "first") == first


def test_evaluate_runs_judges_and_reports_the_selected_runs_only(tmp_path, monkeypatch):
    from arena import evaluate
    from arena.results.experiment_result import AmbiguousResult, ExperimentResult

    monkeypatch.setenv("PYTHONPATH", fakes_env()["PYTHONPATH"])  # the runners import the fakes
    path = _experiment(tmp_path, roles={"first": "evaluated"})
    result = evaluate(path, runs=["second", "third"], output_dir=tmp_path / "out", allow_imports=["rollout_fakes"])
    assert result.ok and result.failures == []  # the runs left out are not failures of this evaluation
    assert result.runs["first"].state == "pending" and result.runs["first"].success_rate is None
    raw = json.loads((tmp_path / "out" / "experiment_result.json").read_text())
    for run in ("second", "third"):
        _assert_measured(tmp_path / "out", run, raw)
    # the policy under evaluation (role: evaluated) was left out: no other run's rate stands in for it
    with pytest.raises(AmbiguousResult, match="first.*not among the runs evaluated"):
        result.success_rate
    # one selected run and no role among the runs: that run is the headline, its own numbers
    one = ExperimentResult.model_validate({**raw, "exit_code": 0, "selected": ["third"]})
    assert one.success_rate == raw["runs"]["third"]["success_rate"] is not None
    with pytest.raises(ConfigError, match="'fourth' selects no run"):
        evaluate(path, runs=["fourth"], output_dir=tmp_path / "other", allow_imports=["rollout_fakes"])
    assert not (tmp_path / "other").exists()
