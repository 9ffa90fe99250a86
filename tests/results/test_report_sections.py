"""The report a user opens from disk: intervals, chart, breakdowns, comparisons, latency, provenance, episodes."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.results.aggregate import build_experiment_result
from arena.results.compare import compare_experiments
from arena.results.provenance import write_provenance
from arena.results.report import write_report
from arena.rollout.records import EpisodeRecord, RecordWriter, read_records, write_json_atomic


def _latency(mean, p50=None, p95=None, requests=10):
    return {"requests": requests, "mean_ms": mean, "p50_ms": p50 or mean, "p95_ms": p95 or mean, "max_ms": 2 * mean}


def _experiment(out, outcomes: dict[str, tuple[str, str, list[str]]], *, seed=0, latency=True):
    """``outcomes``: run -> (task, policy type, outcomes by episode index)."""
    runs = {}
    for run, (task, policy, results) in outcomes.items():
        runs[run] = {
            "task": task, "policy": {"type": policy, "variant": None}, "num_envs": 1, "seed": seed,
            "num_episodes": len(results),
            "work_items": [{"run": run, "episode_index": i, "seed": seed + i} for i in range(len(results))],
        }
        with RecordWriter(out / run / "episodes.jsonl") as writer:
            for i, outcome in enumerate(results):
                writer.write(EpisodeRecord(
                    run=run, episode_index=i, seed=seed + i, env_id=0, task=task,
                    policy={"type": policy, "variant": None}, outcome=outcome,
                    error="server unreachable" if outcome == "error" else None, steps=5,
                    latency=_latency(4.0 + i) if latency and policy.endswith("remote") else None,
                    server_timing={"infer_ms_mean": 1.5, "infer_ms_max": 3.0} if latency and policy.endswith("remote") else None,
                    video=f"videos/ep{i:05d}_seed{seed + i}_{outcome}.mp4" if i == 0 else None,
                ))
        write_json_atomic(out / run / "run_result.json", {"run": run, "state": "completed", "error": None,
                                                           "server": {"host": "10.0.0.7", "port": 8000},  # no task name
                                                           "machine": {"hostname": "node-7", "platform": "Linux", "python": "3.11"}})
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": "demo", "runs": runs})
    (out / "experiment.yaml").write_text("runs:\n  demo: {}\n")
    return out


@pytest.fixture
def report_dir(tmp_path):
    out = _experiment(tmp_path / "out", {
        "pick_expert": ("pick-place-v3", "metaworld_expert_remote", ["success"] * 9 + ["failure"]),
        "pick_zero": ("pick-place-v3", "zero_action", ["success"] * 3 + ["timeout"] * 6 + ["error"] + ["failure"]),
        "reach_zero": ("reach-v3", "zero_action", ["timeout"] * 4),
    })
    (out / "pick_expert" / "server.log").write_text("ready\n")
    write_provenance(out, None)
    return out


def test_report_is_static_and_self_contained(report_dir):
    html = write_report(report_dir).read_text()
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html), "the report must open offline"


def test_report_shows_k_of_n_wilson_intervals_and_outcomes_apart(report_dir):
    html = write_report(report_dir).read_text()
    assert "9/10" in html and "[59.6%, 98.2%]" in html  # Wilson 9/10 (reference table)
    result = json.loads((report_dir / "experiment_result.json").read_text())
    zero = result["runs"]["pick_zero"]
    assert (zero["k"], zero["n"], zero["counts"]) == (3, 10, {"success": 3, "failure": 1, "timeout": 6, "error": 1})


def test_chart_draws_a_bar_and_an_error_bar_per_run(report_dir):
    html = write_report(report_dir).read_text()
    chart = html.split('aria-label="success rate per run with 95% interval"')[1].split("</svg>")[0]
    assert chart.count('class="bar"') == 3 and chart.count('class="errorbar"') == 3


def test_breakdown_by_task_and_comparison_with_newcombe_interval(report_dir):
    result = build_experiment_result(report_dir)
    assert result["by_task"] == {"pick-place-v3": ["pick_expert", "pick_zero"], "reach-v3": ["reach_zero"]}
    [comparison] = result["comparisons"]
    assert (comparison["a"], comparison["b"]) == ("pick_expert", "pick_zero")
    # 9/10 vs 3/10: Newcombe 1998 Table II gives 0.60 [0.17, 0.81]
    assert comparison["difference"] == pytest.approx(0.6)
    assert comparison["ci95"] == pytest.approx([0.1705, 0.8090], abs=1e-3)
    assert comparison["significant"] is True
    assert comparison["paired"]["seeds"] == 9 and comparison["paired"]["only_a"] == 6
    html = write_report(report_dir).read_text()
    assert "+60.0%" in html and "[+17.1%, +80.9%]" in html
    assert "By task" in html and "reach-v3" in html


def test_latency_comes_from_the_records(report_dir):
    result = build_experiment_result(report_dir)
    latency = result["runs"]["pick_expert"]["latency"]
    assert latency["requests"] == 100
    assert latency["mean_ms"] == pytest.approx(8.5)  # 4..13 ms, 10 requests each
    assert latency["server_infer_ms_mean"] == pytest.approx(1.5)
    assert latency["overhead_ms_mean"] == pytest.approx(7.0)
    assert result["runs"]["pick_zero"]["latency"] is None
    html = write_report(report_dir).read_text()
    assert "Request latency" in html and "8.5 ms" in html


def test_provenance_config_seeds_and_machine_are_shown(report_dir):
    html = write_report(report_dir).read_text()
    prov = json.loads((report_dir / "provenance.json").read_text())
    assert prov["arena_version"] and prov["arena_version"] in html
    assert prov["hostname"] in html and "node-7" in html
    assert "Resolved experiment" in html and "demo: {}" in html
    assert "0–9" in html  # seeds of the 10-episode runs


def test_episode_list_puts_failures_first_and_links_videos_and_server_log(report_dir):
    html = write_report(report_dir).read_text()
    section = html.split('id="run-2"')[1].split("</details>")[0]  # pick_zero
    outcomes = re.findall(r'class="outcome-(\w+)"', section)
    assert outcomes[0] == "error" and outcomes[1] == "failure" and outcomes[-1] == "success"
    assert 'href="pick_zero/videos/ep00000_seed0_success.mp4"' in section
    assert 'href="pick_expert/server.log"' in html


def test_records_of_an_unknown_format_version_are_reported_not_misread(tmp_path):
    path = tmp_path / "r" / "episodes.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"format_version": 99, "run": "r", "episode_index": 0, "seed": 0, "outcome": "success"}) + "\n")
    records, issues = read_records(path)
    assert records == [] and "format_version 99" in issues[0]


def test_arena_report_rebuilds_from_records_alone(report_dir):
    (report_dir / "experiment_result.json").unlink(missing_ok=True)
    result = CliRunner().invoke(app, ["report", str(report_dir)])
    assert result.exit_code == 0, result.output
    assert (report_dir / "index.html").exists() and (report_dir / "experiment_result.json").exists()


def test_arena_compare_two_experiments_run_by_run(tmp_path):
    a = _experiment(tmp_path / "a", {"pick": ("pick-place-v3", "p_remote", ["success"] * 3 + ["failure"] * 7),
                                     "old": ("reach-v3", "p_remote", ["success"])})
    b = _experiment(tmp_path / "b", {"pick": ("pick-place-v3", "p_remote", ["success"] * 9 + ["failure"]),
                                     "new": ("reach-v3", "p_remote", ["success"])})
    data = compare_experiments(a, b)
    [row] = data["runs"]
    assert row["run"] == "pick" and row["difference"] == pytest.approx(0.6)  # B - A
    assert row["ci95"] == pytest.approx([0.1705, 0.8090], abs=1e-3) and row["significant"]
    assert row["paired"] == {"seeds": 10, "both": 3, "neither": 1, "only_a": 0, "only_b": 6}
    assert data["only_a"] == ["old"] and data["only_b"] == ["new"]
    cli = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert cli.exit_code == 0 and "+60.0%" in cli.output and "only in A: old" in cli.output
    as_json = CliRunner().invoke(app, ["compare", str(a), str(b), "--json"])
    assert json.loads(as_json.output)["runs"][0]["run"] == "pick"
    assert not (a / "experiment_result.json").exists()  # comparing writes nothing
