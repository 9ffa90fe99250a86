"""Submission, status, cancel and collect against fake Slurm tools on PATH (no cluster needed).

The fakes answer from a JSON file the test edits: ``queue`` ({job id: squeue state, or
"STATE|REASON"}),
``accounting`` ({job id: sacct state}, or null: "accounting storage is disabled"), ``refuse``
(sbatch's error message). Every call is logged to ``calls.log``.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from arena.config import load_experiment_dict
from arena.errors import LaunchError
from arena.launch.base import Submission
from arena.launch.submit import cancel_submission, collect_submission, run_experiment, submission_status

FAKE = r'''#!{python}
import json, os, sys
state_path = os.environ["FAKE_SLURM_STATE"]
state = json.load(open(state_path))
tool = os.path.basename(sys.argv[0])
with open(os.path.join(os.path.dirname(state_path), "calls.log"), "a") as log:
    log.write(json.dumps([tool, *sys.argv[1:]]) + "\n")
def save():
    json.dump(state, open(state_path, "w"))
if tool == "sbatch":
    if state.get("refuse"):
        print("sbatch: error: " + state["refuse"], file=sys.stderr); sys.exit(1)
    state["next"] = state.get("next", 100) + 1
    job = str(state["next"])
    script_at = next(i for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("-"))
    script = open(sys.argv[script_at]).read()
    arr = [a.split("=", 1)[1] for a in sys.argv[1:script_at] if a.startswith("--array=")]
    arr = arr or [l.split("=", 1)[1] for l in script.splitlines() if l.startswith("#SBATCH --array=")]
    if arr:
        spec = arr[0].split("%")[0]
        if "-" in spec:
            first, last = spec.split("-")
            elements = range(int(first), int(last) + 1)
        else:
            elements = [int(k) for k in spec.split(",")]
        for k in elements:
            state["queue"][f"{job}_{k}"] = "PENDING"
    else:
        state["queue"][job] = "PENDING"
    save(); print(job + ";cluster")
elif tool == "squeue":
    ids = sys.argv[sys.argv.index("-j") + 1].split(",")
    rows = [(j, s) for j, s in state["queue"].items() if j.split("_")[0] in ids]
    if not rows:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr); sys.exit(1)
    for j, s in rows:
        print(f"{j}|{s}" if "|" in s else f"{j}|{s}|{'Priority' if s == 'PENDING' else 'None'}")
elif tool == "sacct":
    if state.get("accounting") is None:
        print("Slurm accounting storage is disabled", file=sys.stderr); sys.exit(1)
    for j, s in state["accounting"].items():
        print(f"{j}|{s}")
elif tool == "scontrol":
    job = sys.argv[-1]
    found = state.get("scontrol", {}).get(job)
    if found is None:
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr); sys.exit(1)
    print(f"JobId={job} JobName=x JobState={found} Reason=None")
elif tool == "scancel":
    for job in sys.argv[1:]:
        for j in list(state["queue"]):
            if j.split("_")[0] == job:
                del state["queue"][j]
    save()
'''


class FakeSlurm:
    def __init__(self, root: Path) -> None:
        self.state_path = root / "state.json"
        self.state_path.write_text(json.dumps({"queue": {}, "accounting": None}))
        self.calls_path = root / "calls.log"

    def state(self) -> dict:
        return json.loads(self.state_path.read_text())

    def set(self, **changes) -> None:
        self.state_path.write_text(json.dumps({**self.state(), **changes}))

    def calls(self, tool: str | None = None) -> list[list[str]]:
        if not self.calls_path.exists():
            return []
        calls = [json.loads(line) for line in self.calls_path.read_text().splitlines()]
        return [c for c in calls if tool is None or c[0] == tool]


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch) -> FakeSlurm:
    import sys

    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for tool in ("sbatch", "squeue", "sacct", "scancel", "scontrol"):
        path = bin_dir / tool
        path.write_text(FAKE.replace("{python}", sys.executable))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    fake = FakeSlurm(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(fake.state_path))
    return fake


EXPERT = {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "metaworld_expert_remote"}}


def submit(tmp_path: Path, slurm: dict | None = None, episodes: int = 4, more_runs: dict | None = None) -> Path:
    exp = load_experiment_dict(
        {
            "launch": {"backend": "slurm", "slurm": {"poll_interval_s": 0.05, **(slurm or {})}},
            "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": episodes}},
            "runs": {
                "expert": EXPERT,
                "zero": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}},
                **(more_runs or {}),
            },
        },
        source="exp.yaml",
    )
    out = tmp_path / "out"
    assert run_experiment(exp, output_dir=out, wait=False) == 0
    return out


def write_status(out: Path, run: str, state: str, **fields) -> None:
    path = out / run / "status.json"
    path.write_text(json.dumps({"state": state, "run": run, **fields}))


def test_run_returns_after_sbatch_with_job_ids_and_an_aggregation_job(tmp_path, fake_slurm):
    out = submit(tmp_path)
    submission = Submission.load(out)
    assert submission.backend == "slurm"
    assert submission.ids == {"expert": {"0": "101"}, "zero": {"0": "102"}}
    assert submission.extra["collect_job"] == "103"
    sbatch = fake_slurm.calls("sbatch")
    assert all(call[1] == "--parsable" for call in sbatch)
    assert sbatch[-1][2:4] == ["--dependency=afterany:101:102", "--kill-on-invalid-dep=no"]
    assert sbatch[-1][-1].endswith("slurm/collect.sbatch")
    assert (out / "slurm" / "expert.sbatch").read_text().startswith("#!/bin/bash")
    assert {run: st["state"] for run, st in submission_status(out).items()} == {"expert": "pending", "zero": "pending"}


def test_running_jobs_show_the_state_their_status_json_holds(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={"101": "RUNNING", "102": "RUNNING"})
    write_status(out, "expert", "starting_server")
    status = submission_status(out)
    assert status["expert"]["state"] == "starting_server"
    assert status["zero"]["state"] == "running"  # the job started but wrote nothing yet
    assert status["expert"]["slurm_states"] == {"101": "RUNNING"}


def test_job_that_vanished_without_accounting_is_failed_with_the_reason(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={})  # sacct is disabled (accounting: null)
    write_status(out, "expert", "running")
    write_status(out, "zero", "completed")
    status = submission_status(out)
    assert status["zero"]["state"] == "completed"
    assert status["expert"]["state"] == "failed"
    assert "Slurm job 101 is no longer queued" in status["expert"]["error"]
    assert any(call[0] == "sacct" for call in fake_slurm.calls())


def test_sacct_states_are_used_where_accounting_exists(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={}, accounting={"101": "TIMEOUT", "102": "CANCELLED"})
    status = submission_status(out)
    assert status["expert"]["state"] == "failed"
    assert "reached its time limit (launch.slurm.time)" in status["expert"]["error"]
    assert status["zero"]["state"] == "cancelled"


def test_without_accounting_scontrol_tells_how_a_recent_job_ended(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={}, scontrol={"101": "OUT_OF_MEMORY"})  # sacct disabled; slurmctld still remembers 101
    write_status(out, "zero", "completed")
    status = submission_status(out)
    assert status["expert"]["state"] == "failed"
    assert "ran out of memory: raise launch.slurm.memory" in status["expert"]["error"]
    assert ["scontrol", "show", "job", "-o", "101"] in fake_slurm.calls("scontrol")


def test_collect_reports_a_dead_job_as_failed_not_missing(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={})
    write_status(out, "zero", "running")
    (out / "zero" / "episodes.jsonl").write_text("")
    collect_submission(out)
    result = json.loads((out / "experiment_result.json").read_text())["runs"]
    assert result["zero"]["state"] == "failed"
    assert "no longer queued" in result["zero"]["error"]
    assert json.loads((out / "zero" / "run_result.json").read_text())["state"] == "failed"
    assert (out / "index.html").exists()


def test_cancel_scancels_and_finalizes_jobs_that_never_started(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={"101": "PENDING"})
    write_status(out, "zero", "completed")
    (out / "zero" / "run_result.json").write_text(json.dumps({"run": "zero", "state": "completed"}))
    cancel_submission(out)
    assert ["scancel", "101", "102"] in fake_slurm.calls("scancel")
    status = submission_status(out)
    assert status["expert"]["state"] == "cancelled"
    assert status["zero"]["state"] == "completed"
    assert json.loads((out / "expert" / "run_result.json").read_text())["state"] == "cancelled"
    assert json.loads((out / "zero" / "run_result.json").read_text()) == {"run": "zero", "state": "completed"}


def test_sharded_run_is_one_array_job_with_a_status_per_shard(tmp_path, fake_slurm):
    out = submit(tmp_path, {"shards": {"expert": 2}})
    submission = Submission.load(out)
    assert submission.ids["expert"] == {"0": "101_0", "1": "101_1"}
    assert submission.extra["array_jobs"] == {"expert": "101"}
    for k in (0, 1):
        assert json.loads((out / "expert" / "shards" / str(k) / "status.json").read_text())["shard"] == [k, 2]
    fake_slurm.set(queue={"101_1": "PENDING"})
    (out / "expert" / "shards" / "0" / "status.json").write_text(json.dumps({"state": "completed"}))
    assert submission_status(out)["expert"]["state"] == "running"  # one shard done, one queued


def test_sbatch_refusal_names_slurms_message(tmp_path, fake_slurm):
    fake_slurm.set(refuse="invalid partition specified: nope")
    with pytest.raises(LaunchError, match="invalid partition specified: nope"):
        submit(tmp_path, {"partition": "nope"})


def test_missing_sbatch_says_where_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError, match="Slurm client tools"):
        submit(tmp_path)


def test_status_off_the_cluster_reads_the_status_files(tmp_path, fake_slurm, monkeypatch):
    out = submit(tmp_path)
    write_status(out, "expert", "running")
    write_status(out, "zero", "completed")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))  # no squeue, no sacct
    status = submission_status(out)
    assert status["expert"]["state"] == "running" and status["zero"]["state"] == "completed"
    assert status["expert"]["slurm_states"] is None


def test_a_pending_job_shows_slurms_reason(tmp_path, fake_slurm):
    out = submit(tmp_path)
    fake_slurm.set(queue={"101": "PENDING|Resources", "102": "PENDING|Priority"})
    status = submission_status(out)
    assert status["expert"]["state"] == "pending" and status["expert"]["pending_reason"] == "Resources"
    assert status["expert"]["error"] is None


def test_a_job_that_can_never_start_fails_its_run_naming_the_option_to_change(tmp_path, fake_slurm):
    from arena_slurm.backend import SlurmBackend

    out = submit(tmp_path)
    fake_slurm.set(queue={"101": "PENDING|PartitionConfig"})
    status = submission_status(out)
    assert status["expert"]["state"] == "pending"
    assert "Slurm will never start job 101 (pending: PartitionConfig)" in status["expert"]["error"]
    SlurmBackend(SlurmBackend.Config(poll_interval_s=0.01)).wait(Submission.load(out))  # --wait stops waiting for it
    assert ["scancel", "101"] in fake_slurm.calls("scancel")
    result = json.loads((out / "expert" / "run_result.json").read_text())
    assert result["state"] == "failed" and "lower launch.slurm.cpus, gpus or memory" in result["error"]


def _records(run_dir: Path, run: str, indices: list[int]) -> None:
    from arena.outputs.records import EpisodeRecord, RecordWriter

    run_dir.mkdir(parents=True, exist_ok=True)
    with RecordWriter(run_dir / "episodes.jsonl") as writer:
        for i in indices:
            writer.write(EpisodeRecord(run=run, episode_index=i, seed=i, outcome="failure"))


@pytest.mark.parametrize("work", ["static", "queue"])
def test_resume_resubmits_only_the_shards_with_unfinished_work(tmp_path, fake_slurm, work):
    """static: only shard 1 (its episode 3 is left); queue: both jobs of the run, and the
    queue is reloaded with episode 3 only (either job may claim it)."""
    from arena.launch.submit import resume_experiment
    from arena.outputs.workqueue import WorkQueue

    out = submit(tmp_path, {"shards": {"expert": 2}, "work": work})
    fake_slurm.set(queue={})  # every job ended: shard 1 of expert was killed after one episode
    _records(out / "expert" / "shards" / "0", "expert", [0, 2])
    write_status(out / "expert" / "shards", "0", "completed")
    _records(out / "expert" / "shards" / "1", "expert", [1])
    _records(out / "zero", "zero", [0, 1, 2, 3])
    write_status(out, "zero", "completed")
    assert resume_experiment(out) == 0
    sbatch = fake_slurm.calls("sbatch")[-2:]
    token = Submission.load(out).extra["token"]
    submission = Submission.load(out)
    if work == "queue":
        assert sbatch[0][2:] == [f"--comment=arena:{token}:expert", str(out / "slurm" / "expert.sbatch"), "--resume"]
        assert submission.ids == {"expert": {"0": "104_0", "1": "104_1"}, "zero": {"0": "102"}}
        queue = WorkQueue(out / "queue.sqlite")
        assert queue.counts("expert") == {"queued": 1, "leased": 0, "lapsed": 0, "done": 0}
        assert list(queue.claims("expert")) == [3]
        return
    assert sbatch[0][2:] == ["--array=1", f"--comment=arena:{token}:expert", str(out / "slurm" / "expert.sbatch"), "--resume"]
    assert sbatch[1][2] == "--dependency=afterany:104"
    assert submission.ids == {"expert": {"0": "101_0", "1": "104_1"}, "zero": {"0": "102"}}
    assert json.loads((out / "expert" / "shards" / "1" / "status.json").read_text())["state"] == "pending"
    assert not (out / "expert" / "shards" / "1" / "run_result.json").exists()
    assert json.loads((out / "expert" / "shards" / "0" / "status.json").read_text())["state"] == "completed"
    assert submission.extra["resumes"][0]["runs"] == ["expert"]


def test_runs_sharing_a_server_task_are_one_job_each_with_its_own_status(tmp_path, fake_slurm):
    out = submit(tmp_path, more_runs={"expert2": EXPERT})
    submission = Submission.load(out)
    assert submission.ids == {"expert": {"0": "101"}, "expert2": {"0": "101"}, "zero": {"0": "102"}}
    assert len(fake_slurm.calls("sbatch")) == 3  # two run jobs and the aggregation job
    fake_slurm.set(queue={})  # the group's job vanished: both its runs fail, each naming where its log is
    write_status(out, "expert", "completed")
    write_status(out, "zero", "completed")
    status = submission_status(out)
    assert status["expert"]["state"] == "completed" and status["expert2"]["state"] == "failed"
    assert "Slurm job 101 is no longer queued" in status["expert2"]["error"]
    assert "slurm-101.log in run expert's folder" in status["expert2"]["error"]
