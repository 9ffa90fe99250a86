"""`arena compare` compares like with like, and says when a run's numbers are partial.

The example of issue 17: a Meta-World reach expert against a Franka Kitchen zero-action run
of the same name gave a bold "significant" -100 %; different step limits, a directory against
itself and no common runs all exited 0 without a word.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.config import load_experiment_dict, write_snapshot
from arena.results.aggregate import build_experiment_result
from arena.results.report import write_report
from arena.outputs.progress import read_progress, summary_line
from arena.outputs.records import EpisodeRecord, RecordWriter, StatusWriter, write_run_result
from arena.rollout.workitems import write_manifest

REACH_EXPERT = {
    "environment": {"type": "metaworld", "task": "reach-v3"},
    "policy": {"type": "metaworld_expert_remote"},
    "rollout_limit": {"num_episodes": 6, "max_episode_steps": 100},
}
KITCHEN_ZERO = {
    "environment": {"type": "franka_kitchen", "task": "microwave"},
    "policy": {"type": "zero_action"},
    "rollout_limit": {"num_episodes": 6, "max_episode_steps": 100},
}
REACH_ZERO = {**REACH_EXPERT, "policy": {"type": "zero_action"}}


def _output(out, runs: dict, outcomes: dict, states: dict | None = None):
    """An output directory as `arena run` leaves it: snapshot, manifest, records, results."""
    experiment = load_experiment_dict({"runs": runs}, source=f"{out.name}.yaml")
    write_snapshot(experiment, out / "experiment.yaml")
    write_manifest(experiment, out)
    for name, run in experiment.runs.items():
        seed = run.environment_builder.seed
        with RecordWriter(out / name / "episodes.jsonl") as writer:
            for i, outcome in enumerate(outcomes[name]):
                writer.write(EpisodeRecord(run=name, episode_index=i, seed=seed + i, task=run.environment.task_name(),
                                           policy={"type": run.policy_type, "variant": None}, outcome=outcome))
        state = (states or {}).get(name, "completed")
        write_run_result(out / name, run=name, state=state, episodes_total=run.rollout_limit.num_episodes,
                         error="cancelled by signal" if state == "cancelled" else None)
        StatusWriter(out / name / "status.json").write(
            state=state, episodes_done=len(outcomes[name]), episodes_total=run.rollout_limit.num_episodes,
            successes=outcomes[name].count("success"), errors=outcomes[name].count("error"),
        )
    return out


def _compare(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def test_runs_of_different_environments_are_refused_naming_what_differs(tmp_path):
    a = _output(tmp_path / "a", {"same_name": REACH_EXPERT}, {"same_name": ["success"] * 6})
    b = _output(tmp_path / "b", {"same_name": KITCHEN_ZERO}, {"same_name": ["timeout"] * 6})
    result = _compare(a, b)
    assert result.exit_code == 2, result.stdout
    assert "environment.type: metaworld (A) vs franka_kitchen (B)" in result.stderr
    assert "environment.task: reach-v3 (A) vs microwave (B)" in result.stderr
    assert "-100.0%" not in result.stdout  # no table, no bold "significant" difference

    forced = _compare(a, b, "--force")
    assert forced.exit_code == 0, forced.stderr
    warning_at, table_at = forced.stdout.index("setups differ"), forced.stdout.index("-100.0%")
    assert warning_at < table_at and "environment.task: reach-v3 (A) vs microwave (B)" in forced.stdout


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"rollout_limit": {"num_episodes": 6, "max_episode_steps": 50}}, "rollout_limit.max_episode_steps: 100 (A) vs 50 (B)"),
        ({"environment_builder": {"seed": 1000}}, "environment_builder.seed: 0 (A) vs 1000 (B)"),
        ({"rollout_limit": {"num_episodes": 6, "max_episode_steps": 100, "terminate_on_success": False}},
         "rollout_limit.terminate_on_success: true (A) vs false (B)"),
    ],
)
def test_runs_with_different_limits_or_seeds_are_refused(tmp_path, change, named):
    a = _output(tmp_path / "a", {"r": REACH_ZERO}, {"r": ["timeout"] * 6})
    b = _output(tmp_path / "b", {"r": {**REACH_EXPERT, **change}}, {"r": ["success"] * 6})
    result = _compare(a, b)
    assert result.exit_code == 2 and named in result.stderr, result.stderr


def test_different_policies_on_the_same_setup_are_compared(tmp_path):
    a = _output(tmp_path / "a", {"r": REACH_ZERO}, {"r": ["timeout"] * 6})
    b = _output(tmp_path / "b", {"r": REACH_EXPERT}, {"r": ["success"] * 6})
    result = _compare(a, b)
    assert result.exit_code == 0, result.stderr
    assert "+100.0%" in result.stdout


def test_a_directory_against_itself_and_no_common_runs_are_not_silent(tmp_path):
    a = _output(tmp_path / "a", {"r": REACH_ZERO}, {"r": ["timeout"] * 6})
    b = _output(tmp_path / "b", {"other": REACH_ZERO}, {"other": ["timeout"] * 6})
    (tmp_path / "link").symlink_to(a)
    itself = _compare(a, tmp_path / "link")
    assert itself.exit_code == 2 and "the same output directory" in itself.stderr
    disjoint = _compare(a, b)
    assert disjoint.exit_code == 2 and "no run names in common" in disjoint.stderr


def test_two_policies_of_one_experiment_are_compared_when_paired_by_name(tmp_path):
    out = _output(tmp_path / "a", {"zero": REACH_ZERO, "expert": REACH_EXPERT, "kitchen": KITCHEN_ZERO},
                  {"zero": ["timeout"] * 6, "expert": ["success"] * 6, "kitchen": ["timeout"] * 6})
    result = _compare(out, out, "--pair", "zero:expert", "--json")
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)["runs"][0]
    assert row["run"] == "zero vs expert" and row["design"] == "paired" and row["difference"] == 1.0
    unlike = _compare(out, out, "--pair", "zero:kitchen")
    assert unlike.exit_code == 2 and "environment" in unlike.stderr
    assert _compare(out, out, "--pair", "zero:nope").exit_code == 2
    assert _compare(out, out, "--pair", "zero").exit_code == 2


def test_a_cancelled_run_is_marked_partial_in_compare_and_exits_3(tmp_path):
    a = _output(tmp_path / "a", {"r": REACH_ZERO}, {"r": ["timeout"] * 6})
    b = _output(tmp_path / "b", {"r": REACH_EXPERT}, {"r": ["success"] * 4}, states={"r": "cancelled"})
    table = _compare(a, b)
    assert table.exit_code == 3, table.stderr
    assert "partial: cancelled, 4 of 6 episodes" in table.stdout  # in the table's B cell
    assert "run r in B: partial: cancelled, 4 of 6 episodes" in table.stderr
    as_json = _compare(a, b, "--json")
    assert as_json.exit_code == 3
    data = json.loads(as_json.stdout)
    row = data["runs"][0]
    assert row["partial_b"] == "partial: cancelled, 4 of 6 episodes" and row["state_b"] == "cancelled"
    assert row["partial_a"] is None and data["partial"] == [{"run": "r", "side": "B", "note": row["partial_b"]}]


def test_partial_runs_are_marked_in_report_status_and_progress(tmp_path):
    out = _output(
        tmp_path / "out",
        {"done": REACH_ZERO, "stopped": REACH_EXPERT},
        {"done": ["timeout"] * 6, "stopped": ["success"] * 2 + ["error"]},
        states={"stopped": "cancelled"},
    )
    result = build_experiment_result(out)
    assert result["runs"]["stopped"]["partial_note"] == "partial: cancelled, 3 of 6 episodes, 1 error episode"
    assert result["runs"]["done"]["partial_note"] is None
    html = write_report(out, result).read_text()
    assert 'id="partial-runs"' in html
    assert '<a href="#run-2">stopped</a> <span class="partial"' in html  # the runs table
    assert '<span class="chart-label">stopped (partial)</span>' in html  # the chart's label
    assert '<a href="#run-1">done</a> <span class="partial"' not in html

    from arena.launch.base import Submission

    Submission(backend="local", experiment="out", output_dir=str(out)).save()
    status = CliRunner().invoke(app, ["status", str(out)])
    assert "partial: cancelled, 3 of 6 episodes, 1 error episode" in status.output

    line = summary_line(read_progress(out, ["done", "stopped"]))
    assert "| partial: stopped (cancelled, 3 of 6 episodes, 1 error episode)" in line
