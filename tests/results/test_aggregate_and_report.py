from __future__ import annotations

import json

import pytest

from arena.results.aggregate import build_experiment_result
from arena.results.run_summary import collect_run_records
from arena.results.report import write_report
from arena.outputs.records import EpisodeRecord, RecordWriter, write_json_atomic


def _rec(run, i, outcome, *, error=None, finished="2026-01-01T00:00:00+00:00", env_id=0):
    return EpisodeRecord(
        run=run, episode_index=i, seed=100 + i, env_id=env_id, task="pick-place-v3",
        policy={"type": "zero_action", "variant": None}, outcome=outcome, error=error,
        steps=7, duration_s=0.25, return_=1.0, finished_at=finished,
    )


def _write(path, records):
    with RecordWriter(path) as writer:
        for r in records:
            writer.write(r)


def _manifest(out, runs):
    write_json_atomic(out / "manifest.json", {
        "format_version": 1, "experiment": "demo", "created_at": "2026-01-01T00:00:00+00:00",
        "runs": {
            name: {"task": "pick-place-v3", "policy": {"type": "zero_action", "variant": None},
                   "num_envs": 2, "seed": 100, "num_episodes": n,
                   "work_items": [{"run": name, "episode_index": i, "seed": 100 + i} for i in range(n)]}
            for name, n in runs.items()
        },
    })


@pytest.fixture
def output_dir(tmp_path):
    out = tmp_path / "out"
    _manifest(out, {"good": 10, "sharded": 6, "broken": 5, "waiting": 4})
    # good: 9 successes, 1 failure, completed
    _write(out / "good" / "episodes.jsonl", [_rec("good", i, "success") for i in range(9)] + [_rec("good", 9, "failure")])
    write_json_atomic(out / "good" / "run_result.json", {"run": "good", "state": "completed", "error": None})
    (out / "good" / "server.log").write_text("server ready\n")
    # sharded: shard 0 = 0,2,4 ; shard 1 = 1,3,5 with episode 3 first an error, then a success on resume
    _write(out / "sharded" / "shards" / "0" / "episodes.jsonl",
           [_rec("sharded", 0, "success"), _rec("sharded", 2, "timeout"), _rec("sharded", 4, "success")])
    _write(out / "sharded" / "shards" / "1" / "episodes.jsonl", [
        _rec("sharded", 1, "failure"),
        _rec("sharded", 3, "error", error="server unreachable", finished="2026-01-01T00:00:01+00:00"),
        _rec("sharded", 5, "success"),
        _rec("sharded", 3, "success", finished="2026-01-01T00:00:09+00:00"),
    ])
    for k in (0, 1):
        write_json_atomic(out / "sharded" / "shards" / str(k) / "run_result.json", {"state": "completed", "error": None})
    # broken: failed after errors; the error text carries markup that must be escaped
    _write(out / "broken" / "episodes.jsonl", [
        _rec("broken", 0, "error", error="<script>alert(1)</script>"),
        _rec("broken", 1, "error", error="connection refused"),
    ])
    write_json_atomic(out / "broken" / "run_result.json",
                      {"state": "failed", "error": "3 consecutive error episodes; last: connection refused"})
    return out


def test_shard_records_merge_by_episode_index_non_error_wins(output_dir):
    records = collect_run_records(output_dir / "sharded")
    assert [(r.episode_index, r.outcome) for r in records] == [
        (0, "success"), (1, "failure"), (2, "timeout"), (3, "success"), (4, "success"), (5, "success")]


def test_experiment_result_reports_k_of_n_wilson_and_states(output_dir):
    result = build_experiment_result(output_dir)
    assert json.loads((output_dir / "experiment_result.json").read_text()) == result
    assert result["format_version"] == 1 and result["experiment"] == "demo" and result["created_at"]
    runs = result["runs"]
    assert list(runs) == ["good", "sharded", "broken", "waiting"]
    good = runs["good"]
    assert (good["k"], good["n"], good["errors"], good["state"]) == (9, 10, 0, "completed")
    assert good["success_rate"] == 0.9 and good["ci_method"] == "wilson"
    assert [round(100 * x, 1) for x in good["ci95"]] == [59.6, 98.2]
    assert good["episodes_total"] == 10 and good["task"] == "pick-place-v3"
    assert good["policy"] == {"type": "zero_action", "variant": None} and good["server_log"] == "good/server.log"
    sharded = runs["sharded"]
    assert sharded["counts"] == {"success": 4, "failure": 1, "timeout": 1, "error": 0} and sharded["state"] == "completed"
    broken = runs["broken"]
    assert broken["state"] == "failed" and "consecutive" in broken["error"]
    assert broken["n"] == 0 and broken["success_rate"] is None and broken["errors"] == 2 and broken["partial"]
    waiting = runs["waiting"]
    assert waiting["state"] == "pending" and waiting["episodes_recorded"] == 0 and waiting["missing_episodes"] == 4
    overall = result["overall"]
    assert overall["counts"] == {"success": 13, "failure": 2, "timeout": 1, "error": 2}
    assert (overall["k"], overall["n"]) == (13, 16) and overall["states"]["pending"] == 1


def test_torn_lines_are_listed_as_issues_not_errors(output_dir):
    with open(output_dir / "good" / "episodes.jsonl", "ab") as handle:
        handle.write(b'{"torn": ')
    result = build_experiment_result(output_dir, write=False)
    assert result["runs"]["good"]["k"] == 9 and len(result["runs"]["good"]["issues"]) == 1


def test_runs_without_a_manifest_are_found_from_their_directories(tmp_path):
    out = tmp_path / "o"
    _write(out / "solo" / "episodes.jsonl", [_rec("solo", 0, "success")])
    result = build_experiment_result(out)
    assert result["experiment"] == "o" and result["runs"]["solo"]["k"] == 1
    assert result["runs"]["solo"]["task"] == "pick-place-v3"


def test_report_shows_runs_numbers_and_escapes_everything(output_dir):
    path = write_report(output_dir)
    assert path == output_dir / "index.html"
    html = path.read_text()
    for name in ("good", "sharded", "broken", "waiting"):
        assert name in html
    assert "9/10" in html and "90.0%" in html and "[59.6%, 98.2%]" in html
    assert "4/6" in html and "failed" in html and "pending" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="good/server.log"' in html and 'class="chart"' in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing fetched from the network
    # failures and errors are listed before successes
    good_section = html[html.index('id="run-1"'):html.index('id="run-2"')]
    assert good_section.index("failure") < good_section.index("success")
    assert (output_dir / "experiment_result.json").exists()


def test_expanded_runs_are_reported_per_suite_with_interval_and_per_task(tmp_path):
    out = tmp_path / "out"
    _manifest(out, {"spatial.0": 10, "spatial.1": 10, "alone": 10})
    outcomes = {"spatial.0": ["success"] * 9 + ["timeout"], "spatial.1": ["success"] * 5 + ["timeout"] * 5, "alone": ["success"] * 10}
    for run, listed in outcomes.items():
        _write(out / run / "episodes.jsonl", [_rec(run, i, o) for i, o in enumerate(listed)])
        write_json_atomic(out / run / "run_result.json", {"run": run, "state": "completed", "error": None})
    result = build_experiment_result(out)
    assert list(result["by_group"]) == ["spatial"]  # a run that was not expanded is no group
    suite = result["by_group"]["spatial"]
    assert suite["runs"] == ["spatial.0", "spatial.1"] and (suite["k"], suite["n"]) == (14, 20)
    assert suite["success_rate"] == pytest.approx(0.7) and suite["macro_success_rate"] == pytest.approx(0.7)
    assert suite["ci95"][0] == pytest.approx(0.4810, abs=1e-3) and suite["ci95"][1] == pytest.approx(0.8545, abs=1e-3)
    assert suite["partial"] is False
    html = write_report(out, result).read_text()
    assert 'id="groups"' in html and "By suite" in html and "14/20" in html
