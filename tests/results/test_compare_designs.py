"""``arena compare`` and the report: paired or unpaired and why, Holm, suites, methods named."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.results.aggregate import build_experiment_result
from arena.results.compare import compare_experiments
from arena.results.report import write_report
from arena.outputs.records import EpisodeRecord, RecordWriter, write_json_atomic


def _write(out, runs: dict[str, tuple[str, str, str]], *, seed=0):
    """``runs``: name -> (task, policy type, outcomes as a string of s/f by episode index)."""
    manifest = {}
    for run, (task, policy, outcomes) in runs.items():
        manifest[run] = {"task": task, "policy": {"type": policy, "variant": None}, "num_envs": 1, "seed": seed,
                         "num_episodes": len(outcomes)}
        with RecordWriter(out / run / "episodes.jsonl") as writer:
            for i, o in enumerate(outcomes):
                writer.write(EpisodeRecord(run=run, episode_index=i, seed=seed + i, env_id=0, task=task,
                                           policy={"type": policy, "variant": None},
                                           outcome="success" if o == "s" else "failure", steps=3))
        write_json_atomic(out / run / "run_result.json", {"run": run, "state": "completed", "error": None})
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": out.name, "runs": manifest})
    return out


SUITE_A = {"pick": ("pick", "old", "ssffffffff"), "libero.t0": ("t0", "old", "ssssffffff"),
           "libero.t1": ("t1", "old", "sssssfffff")}
SUITE_B = {"pick": ("pick", "new", "ssssssssff"), "libero.t0": ("t0", "new", "ssssssssss"),
           "libero.t1": ("t1", "new", "sssssssssf")}


def test_like_runs_are_compared_paired_with_holm_and_a_suite_row(tmp_path):
    a, b = _write(tmp_path / "a", SUITE_A), _write(tmp_path / "b", SUITE_B)
    data = compare_experiments(a, b)
    pick = next(r for r in data["runs"] if r["run"] == "pick")
    assert pick["design"] == "paired" and "10 episode pairs" in pick["design_reason"]
    assert pick["test_method"] == "mcnemar-exact" and pick["discordant"] == [0, 6]
    assert pick["p_value"] == pytest.approx(2 / 64)  # McNemar: 0 vs 6 discordant
    assert pick["ci_method"] == "newcombe-paired-hybrid-score"
    raw = sorted(r["p_value"] for r in data["runs"])
    assert sorted(r["p_holm"] for r in data["runs"]) == pytest.approx(
        [min(1, 3 * raw[0]), max(min(1, 3 * raw[0]), min(1, 2 * raw[1])), max(min(1, 3 * raw[0]), min(1, 2 * raw[1]), raw[2])])
    assert "Holm" in data["multiplicity"] and "not adjusted" in data["multiplicity"]
    [suite] = data["suites"]
    assert suite["suite"] == "libero" and suite["tasks"] == 2 and suite["designs"] == {"paired": 2}
    assert suite["difference"] == pytest.approx(((1.0 - 0.4) + (0.9 - 0.5)) / 2)
    assert suite["ci_method"] in data["methods"]
    cli = CliRunner().invoke(app, ["compare", str(a), str(b)], terminal_width=220)
    assert cli.exit_code == 0, cli.output
    assert "run pick: paired: same environment, task, init states and seeds per episode" in cli.output
    assert "suite libero: task-averaged" in cli.output and "Holm" in cli.output
    assert "mcnemar-exact: McNemar's exact test" in cli.output
    as_json = json.loads(CliRunner().invoke(app, ["compare", str(a), str(b), "--json"]).output)
    assert as_json["runs"][0]["design"] in ("paired", "unpaired") and as_json["methods"]["holm"]


def test_forced_unlike_runs_are_unpaired_and_say_why(tmp_path):
    a = _write(tmp_path / "a", {"pick": SUITE_A["pick"]})
    b = _write(tmp_path / "b", {"pick": SUITE_B["pick"]}, seed=100)
    refused = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert refused.exit_code == 2 and "environment_builder.seed" in refused.output
    [row] = compare_experiments(a, b)["runs"]
    assert row["design"] == "unpaired" and "environment_builder.seed" in row["design_reason"]
    assert row["test_method"] == "fisher-exact" and row["ci_method"] == "newcombe-hybrid-score"
    assert compare_experiments(a, b)["multiplicity"] is None  # one test: nothing to adjust
    forced = CliRunner().invoke(app, ["compare", str(a), str(b), "--force"], terminal_width=220)
    assert forced.exit_code == 0 and "run pick: unpaired: the runs' setups differ" in forced.output


def test_report_compares_suites_per_task_and_explains_methods(tmp_path):
    runs = {**{f"old.{k.split('.')[-1]}": v for k, v in SUITE_A.items() if "." in k},
            **{f"new.{k.split('.')[-1]}": v for k, v in SUITE_B.items() if "." in k}}
    out = _write(tmp_path / "out", runs)
    result = build_experiment_result(out)
    assert {c["design"] for c in result["comparisons"]} == {"paired"}
    assert all("p_holm" in c for c in result["comparisons"]) and "2 tests" in result["multiplicity"]
    [suite] = result["group_comparisons"]
    assert (suite["a"], suite["b"], suite["tasks"]) == ("old", "new", 2)
    assert suite["difference"] == pytest.approx(-0.5)  # first − second, like the task rows
    group = result["by_group"]["old"]
    assert group["macro_success_rate"] == pytest.approx(0.45) and group["macro_ci95"][0] < 0.45 < group["macro_ci95"][1]
    assert group["ci_method"] == "stratified-wilson-effective-n"
    html = write_report(out).read_text()
    assert "Suites compared (task-averaged" in html and "mcnemar-exact" in html and "(Holm)" in html
    assert "stratified-wilson-effective-n</code>:" in html
