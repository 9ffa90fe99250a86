"""The collector task and the runner's failure record, run here on the files OSMO would give them."""

from __future__ import annotations

import json
from pathlib import Path

from osmo_testkit import experiment, fake_models, render, run  # noqa: F401

from arena.rollout.records import EpisodeRecord, RecordWriter, StatusWriter, write_run_result
from arena_osmo.collector import MARKER, main as collector_main
from arena_osmo.render import COLLECT_FILE, SNAPSHOT_FILE
from arena_osmo.runner_failure import main as failure_main


def runner_output(root: Path, run: str, outcomes: list[str], state: str, error: str | None = None) -> Path:
    """What `arena run-one` leaves in a runner task's {{output}}."""
    run_dir = root / run
    run_dir.mkdir(parents=True)
    records = [
        EpisodeRecord(run=run, episode_index=i, seed=i, outcome=o, error="server gone" if o == "error" else None)
        for i, o in enumerate(outcomes)
    ]
    with RecordWriter(run_dir / "episodes.jsonl") as writer:
        for record in records:
            writer.write(record)
    StatusWriter(run_dir / "status.json").write(state=state, run=run, error=error, episodes_done=len(records))
    write_run_result(run_dir, run=run, state=state, error=error, episodes_total=4)
    return run_dir


def collector_inputs(wf, tmp_path: Path) -> tuple[Path, Path]:
    """The collector task's files, with the {{input:...}} tokens filled as OSMO would."""
    task = wf.spec["workflow"]["groups"][-1]["tasks"][0]
    files = {f["path"]: f["contents"] for f in task["files"]}
    plan = json.loads(files[COLLECT_FILE])
    for i, item in enumerate(task["inputs"]):
        plan["runs"] = {r: d.replace(f"{{{{input:{item['task']}}}}}", str(tmp_path / "inputs" / str(i))) for r, d in plan["runs"].items()}
    plan["workflow"] = "arena-exp-7"
    plan_path = tmp_path / "collect.json"
    plan_path.write_text(json.dumps(plan))
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(files[SNAPSHOT_FILE])
    return plan_path, snapshot


def test_collector_reports_a_failed_run_as_failed(fake_models, tmp_path):
    exp = experiment({"good": run("fake_openpi"), "bad": run("fake_gr00t"), "nothing": run("zero_action")})
    (wf,) = render(exp)
    runner_output(tmp_path / "inputs" / "0", "good", ["success", "failure", "success", "success"], "completed")
    runner_output(tmp_path / "inputs" / "1", "bad", ["success", "error"], "failed", "policy server stopped answering")
    (tmp_path / "inputs" / "2").mkdir(parents=True)  # the runner uploaded nothing
    plan, snapshot = collector_inputs(wf, tmp_path)
    out = tmp_path / "published"

    assert collector_main([str(plan), str(snapshot), str(out)]) == 0

    result = json.loads((out / "experiment_result.json").read_text())
    assert result["runs"]["good"]["state"] == "completed"
    assert (result["runs"]["good"]["k"], result["runs"]["good"]["n"]) == (3, 4)
    assert result["runs"]["bad"]["state"] == "failed"
    assert result["runs"]["bad"]["error"] == "policy server stopped answering"
    assert result["runs"]["bad"]["errors"] == 1
    assert result["runs"]["nothing"]["state"] == "failed"
    assert "uploaded no output" in result["runs"]["nothing"]["error"]
    assert (out / "index.html").exists() and (out / "manifest.json").exists()
    assert json.loads((out / MARKER).read_text())["workflow"] == "arena-exp-7"
    assert "failed" in (out / "index.html").read_text()


def test_probe_failure_records_the_run_as_failed(tmp_path):
    assert failure_main([str(tmp_path), "pi", "policy server r0-pi-server was not ready after 900 s"]) == 0
    result = json.loads((tmp_path / "pi" / "run_result.json").read_text())
    status = json.loads((tmp_path / "pi" / "status.json").read_text())
    assert result["state"] == status["state"] == "failed"
    assert "not ready after 900 s" in result["error"]
