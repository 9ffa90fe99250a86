"""`arena run … --backend slurm` on a real one-node Slurm cluster (see conftest.py).

Server and runner steps share one allocation here; runs of one server task share one job and
one server; pyxis and het jobs need more than one
node and a container runtime, so test_slurm_scripts.py checks them as golden files.
"""

from __future__ import annotations

import json
import time

import pytest
from slurm_testkit import QUICKSTART_RUNS, arena, outcomes, quickstart, results, state_of, wait_for, write_experiment

pytestmark = pytest.mark.slow

@pytest.fixture(scope="module")
def quickstart_on_slurm(slurm_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quickstart")
    path = quickstart(tmp, "quickstart")
    out = tmp / "slurm"
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + slurm_cluster.logs()
    return path, out, result


def test_quickstart_on_slurm_matches_a_local_run_with_the_same_seeds(quickstart_on_slurm, tmp_path):
    path, out, result = quickstart_on_slurm
    assert "Slurm job" in result.stdout and str(out / "index.html") in result.stdout.replace("\n", "")
    local = tmp_path / "local"
    done = arena("run", path, "--backend", "local", "--output-dir", local)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    slurm_runs, local_runs = results(out), results(local)
    assert set(slurm_runs) == set(QUICKSTART_RUNS)
    for run in QUICKSTART_RUNS:
        assert slurm_runs[run]["state"] == "completed", slurm_runs[run]
        assert slurm_runs[run]["counts"] == local_runs[run]["counts"], run
        assert outcomes(out, run) == outcomes(local, run), run
        assert len(outcomes(out, run)) == 3
    # the expert's server ran as a step of the run's own job, next to the runner step
    job = json.loads((out / "submission.json").read_text())["ids"]["reach_expert"]["0"]
    server = json.loads((out / "reach_expert" / "run_result.json").read_text())["server"]
    assert server["slurm_job_id"] == job and server["task"] == "metaworld-expert"
    log = (out / "reach_expert" / "server.log").read_text()
    assert "serving metaworld-expert" in log
    # stopped with SIGTERM (not srun's SIGKILL), and it did not need the SIGKILL after the grace
    assert "stopping the policy server (the runner has ended): SIGTERM" in log and "did not stop" not in log, log
    assert "forcing job termination" not in log and "Killed" not in log, log
    assert (out / "index.html").exists() and list((out / "slurm").glob("collect-*.log"))
    # the two expert runs share the server task: one job started one server for both
    ids = json.loads((out / "submission.json").read_text())["ids"]
    assert ids["pick_place_expert"] == ids["reach_expert"] and ids["reach_zero"] != ids["reach_expert"]
    assert not (out / "slurm" / "pick_place_expert.sbatch").exists()
    job_log = (out / "reach_expert" / f"slurm-{job}.log").read_text()
    assert job_log.count("starting policy server metaworld-expert") == 1, job_log
    assert "for runs reach_expert, pick_place_expert" in job_log, job_log
    shared = json.loads((out / "pick_place_expert" / "run_result.json").read_text())["server"]
    assert shared["port"] == server["port"] and shared["shared_by"] == ["reach_expert", "pick_place_expert"]


def test_sharded_run_gives_the_unsharded_totals(quickstart_on_slurm, slurm_cluster, tmp_path):
    _, unsharded, _ = quickstart_on_slurm
    path = quickstart(tmp_path, "quickstart", runs=("reach_expert",), shards=2)
    out = tmp_path / "sharded"
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + slurm_cluster.logs()
    sharded, plain = results(out), results(unsharded)
    for key in ("state", "counts", "n", "k", "episodes_recorded", "missing_episodes"):
        assert sharded["reach_expert"][key] == plain["reach_expert"][key], key
    assert outcomes(out, "reach_expert") == outcomes(unsharded, "reach_expert")  # merged by episode_index
    assert sorted(p.name for p in (out / "reach_expert" / "shards").iterdir()) == ["0", "1"]
    assert len(list((out / "reach_expert").glob("slurm-*_*.log"))) == 2


def test_server_that_never_becomes_ready_fails_clearly_and_other_runs_complete(slurm_cluster, tmp_path):
    reach = {"type": "metaworld", "task": "reach-v3"}
    path = write_experiment(
        tmp_path,
        "broken",
        {
            "never_ready": {
                "environment": reach,
                "policy": {"type": "metaworld_expert_remote"},
                "server": {"local_command": ["sleep", "300"], "startup_timeout_s": 3},
            },
            "zero": {"environment": reach, "policy": {"type": "zero_action"}},
        },
    )
    out = tmp_path / "out"
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]
    runs = results(out)
    assert runs["never_ready"]["state"] == "failed"
    assert "was not ready (websocket on" in runs["never_ready"]["error"]
    assert "startup_timeout_s=3" in runs["never_ready"]["error"]
    assert runs["never_ready"]["counts"]["failure"] == 0  # an infrastructure failure, not policy failures
    assert runs["zero"]["state"] == "completed" and runs["zero"]["n"] == 2
    status = arena("status", out)
    assert "never_ready" in status.stdout and "failed" in status.stdout


def test_cancelling_a_running_submission_keeps_finished_runs(slurm_cluster, tmp_path):
    reach = {"type": "metaworld", "task": "reach-v3"}
    path = write_experiment(
        tmp_path,
        "cancel",
        {
            "short": {"environment": reach, "policy": {"type": "zero_action"}},
            "long": {
                "environment": reach,
                "policy": {"type": "zero_action"},
                "rollout_limit": {"num_episodes": 500, "max_episode_steps": 200},
            },
        },
    )
    out = tmp_path / "out"
    started = time.monotonic()
    result = arena("run", path, "--backend", "slurm", "--output-dir", out)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30  # returned after sbatch, did not wait for the runs
    assert "arena status" in result.stdout
    wait_for(
        lambda: state_of(out / "short" / "status.json").get("state") == "completed"
        and state_of(out / "long" / "status.json").get("episodes_done", 0) >= 1,
        180,
        "the short run did not complete and the long one did not record an episode",
        slurm_cluster,
    )
    cancelled = arena("cancel", out)
    assert cancelled.returncode == 0, cancelled.stderr
    status = arena("status", out)
    assert status.returncode == 0, status.stderr
    lines = {line.split()[1]: line for line in status.stdout.splitlines() if line.startswith("│")}
    assert "cancelled" in lines["long"] and "completed" in lines["short"]
    collect_job = json.loads((out / "submission.json").read_text())["extra"]["collect_job"]
    wait_for(lambda: (out / "slurm" / f"collect-{collect_job}.log").exists() and (out / "index.html").exists(),
             120, "the aggregation job did not build the report", slurm_cluster)
    wait_for(lambda: "report:" in (out / "slurm" / f"collect-{collect_job}.log").read_text(), 60,
             "the aggregation job did not finish", slurm_cluster)
    runs = results(out)
    assert runs["short"]["state"] == "completed" and runs["short"]["n"] == 2
    assert runs["long"]["state"] == "cancelled"
    assert runs["long"]["episodes_recorded"] >= 1  # finished episodes are kept
