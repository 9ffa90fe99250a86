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
from arena.outputs.records import EpisodeRecord, RecordWriter, read_records, write_json_atomic


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
    chart = html[html.index('aria-label="success rate per run with 95% interval"'):html.index('id="tasks"')]
    assert len(re.findall(r'class="bar[ "]', chart)) == 3 and chart.count('class="errorbar"') == 3
    assert chart.count('class="bar is-partial"') == 1  # pick_zero has an error episode
    # 9/10: the bar is 90 % wide, the whisker spans the Wilson interval [59.6 %, 98.2 %]
    assert 'class="bar" style="width: 90.0%"' in chart
    assert 'class="errorbar" style="left: 59.6%; width: 38.6%"' in chart


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
    # paired seeds read as `arena compare` prints them: only first / only second of the common seeds
    assert "paired seeds: only first / only second" in html and ">6 / 0 of 9</td>" in html
    assert '<h3 id="compare-chart">Differences of success rates' in html  # the forest plot has a heading


def test_one_policy_type_served_by_two_models_is_compared(tmp_path):
    out = _experiment(tmp_path / "out", {
        "pick_droid": ("pick-place-v3", "pi0_remote", ["success"] * 8 + ["failure"] * 2),
        "pick_libero": ("pick-place-v3", "pi0_remote", ["success"] * 2 + ["failure"] * 8),
        "pick_droid_again": ("pick-place-v3", "pi0_remote", ["success"] * 7 + ["failure"] * 3),
    })
    for run, checkpoint in (("pick_droid", "pi05_droid"), ("pick_libero", "pi05_libero"), ("pick_droid_again", "pi05_droid")):
        result = json.loads((out / run / "run_result.json").read_text())
        result["model"] = {"policy_type": "pi0_remote", "checkpoint": f"gs://openpi-assets/checkpoints/{checkpoint}",
                           "revision": None, "image": None, "image_digest": None, "server_metadata": {"session": run}}
        write_json_atomic(out / run / "run_result.json", result)
    result = build_experiment_result(out)
    labels = {name: run["policy_label"] for name, run in result["runs"].items()}
    assert labels["pick_droid"] == labels["pick_droid_again"] == "pi0_remote · checkpoint gs://…/pi05_droid"
    assert labels["pick_libero"] == "pi0_remote · checkpoint gs://…/pi05_libero"  # short, not the whole path
    pairs = {(c["a"], c["b"]): c for c in result["comparisons"]}
    assert set(pairs) == {("pick_droid", "pick_libero"), ("pick_libero", "pick_droid_again")}  # one model: no pair
    assert "checkpoint" in pairs[("pick_droid", "pick_libero")]["models_differ"]
    assert pairs[("pick_droid", "pick_libero")]["difference"] == pytest.approx(0.6)
    assert set(result["by_policy"]) == {labels["pick_droid"], labels["pick_libero"]}  # never pooled across models
    html = write_report(out, result).read_text()
    compared = html[html.index('id="compare"'):html.index('id="latency"')]
    assert "pick_droid − pick_libero" in compared and "checkpoint gs://…/pi05_libero" in compared
    assert "2 policies" in html  # no overall rate pooled across the two models


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
    html = write_report(report_dir, redact=False).read_text()
    prov = json.loads((report_dir / "provenance.json").read_text())
    assert prov["arena_version"] and prov["arena_version"] in html
    assert f"host <code>{prov['hostname']}</code>" in html and "host <code>node-7</code>" in html
    assert prov["platform"] in html  # the kernel too, when asked for
    assert "Resolved experiment" in html and "demo: {}" in html
    assert "0–9" in html  # seeds of the 10-episode runs


def _shareable_experiment(tmp_path, monkeypatch):
    """An experiment whose files name its machines and paths everywhere a report shows text."""
    checkout = tmp_path / "home" / "ada" / "arena"
    monkeypatch.setenv("HOME", str(tmp_path / "home" / "ada"))
    out = _experiment(checkout / "outputs" / "demo", {
        "pick_expert": ("pick-place-v3", "metaworld_expert_remote", ["success", "error"]),
    })
    run = json.loads((out / "pick_expert" / "run_result.json").read_text())
    run.update(state="completed", error=f"server on node-7 wrote {checkout}/outputs/demo/pick_expert/server.log")
    run["machine"]["platform"] = "Linux-6.8.0-45-generic-x86_64-with-glibc2.39"
    write_json_atomic(out / "pick_expert" / "run_result.json", run)
    (out / "experiment.yaml").write_text(f"runs:\n  demo: {{environment: {{python: {checkout}/.venvs/x/bin/python}}}}\n")
    write_provenance(out, None)
    prov = json.loads((out / "provenance.json").read_text())
    prov.update(
        hostname="login-3.cluster.example", cwd=str(checkout), platform="Linux-6.8.0-45-generic-x86_64-with-glibc2.39",
        argv=[f"{checkout}/.venv/bin/arena", "run", f"{checkout}/examples/quickstart.yaml"],
        git={"commit": "a" * 40, "dirty": False, "root": str(checkout)},
        resumes=[{"at": "2026-01-02T03:04:05.678901+00:00", "hostname": "login-3.cluster.example", "keep_errors": False}],
    )
    write_json_atomic(out / "provenance.json", prov)
    return out, checkout


def test_the_report_names_no_host_kernel_or_local_path_unless_asked(tmp_path, monkeypatch):
    out, checkout = _shareable_experiment(tmp_path, monkeypatch)
    secrets = ("login-3.cluster.example", "node-7", "6.8.0-45-generic", str(checkout), str(tmp_path), "10.0.0.7")

    result = CliRunner().invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    html = (out / "index.html").read_text()
    for secret in secrets:
        assert secret not in html, secret
    assert "Linux" in html and "<checkout>/.venvs/x/bin/python" in html.replace("&lt;", "<").replace("&gt;", ">")
    # the command, its program's path cut, as a shell reads it (shlex.join: '<' quoted)
    assert "arena run &#39;&lt;checkout&gt;/examples/quickstart.yaml&#39;" in html
    assert "arena report DIR --no-redact" in html  # the page says what it left out and how to get it
    # provenance.json and the run's own files keep everything
    assert "login-3.cluster.example" in (out / "provenance.json").read_text()
    assert "node-7" in (out / "pick_expert" / "run_result.json").read_text()

    result = CliRunner().invoke(app, ["report", str(out), "--no-redact"])
    assert result.exit_code == 0, result.output
    html = (out / "index.html").read_text()
    for secret in secrets:
        assert secret in html, secret
    assert "--no-redact writes them in" not in html


def test_the_header_labels_its_facts_and_times_have_whole_seconds(report_dir):
    html = write_report(report_dir).read_text()
    header = html[html.index("<h1>"):html.index("<nav>")]
    assert re.search(r"<dt>report generated</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</dd>", header), header
    assert re.search(r"<dt>experiment started</dt><dd>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</dd>", header), header
    assert "<dt>arena</dt>" in header and "<dt>git commit</dt>" in header
    assert not re.search(r"\d\d:\d\d:\d\d\.\d+", html)  # no fractions of seconds anywhere


def test_returns_have_one_format_without_exponents(tmp_path):
    out = _experiment(tmp_path / "out", {"r": ("reach-v3", "zero_action", ["timeout"] * 3)})
    records, _ = read_records(out / "r" / "episodes.jsonl")
    (out / "r" / "episodes.jsonl").unlink()
    with RecordWriter(out / "r" / "episodes.jsonl") as writer:
        for record, value in zip(records, (1660.349, 5, -0.25)):
            writer.write(record.model_copy(update={"return_": value}))
    html = write_report(out).read_text()
    returns = re.findall(r'<td class="num">([^<]*)</td>\n  <td class="num">[\d.]+ s</td>', html)
    assert sorted(returns) == sorted(["1,660.35", "5.00", "-0.25"]), returns
    assert "e+" not in html


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
    assert "paired seeds: only A / only B" in cli.output and "0 / 6 of 10" in cli.output  # as the report says it
    as_json = CliRunner().invoke(app, ["compare", str(a), str(b), "--json"])
    assert json.loads(as_json.output)["runs"][0]["run"] == "pick"
    assert not (a / "experiment_result.json").exists()  # comparing writes nothing


def test_by_task_is_folded_where_it_would_repeat_the_runs_table(tmp_path):
    one_task = _experiment(tmp_path / "one", {
        "pick_a": ("pick-place-v3", "zero_action", ["success"] * 2 + ["failure"] * 3),
        "pick_b": ("pick-place-v3", "random_action", ["failure"] * 5),
    })
    html = write_report(one_task).read_text()
    assert '<details class="fold" id="tasks">' in html and '<h2 id="tasks">' not in html
    assert '<h2 id="chart">Success rates</h2>' in html  # plain runs: the chart stays open
