"""Submission faults on the real one-node Slurm cluster (see conftest.py), each bounded to well
under a minute: a time limit its own warning cannot fit in, a '%' in the output directory,
a job sbatch refuses, a time-limit warning that arrives during the set-up lines."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from slurm_testkit import REACH, arena, slurm_options, state_of, wait_for, write_experiment

pytestmark = pytest.mark.slow

ZERO = {"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}


def test_validate_refuses_a_time_limit_not_longer_than_its_warning(slurm_cluster, tmp_path):
    path = write_experiment(tmp_path, "short", ZERO, time="1")  # 60 s, warned 90 s ahead by default
    result = arena("validate", path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    flat = " ".join(result.stderr.split())
    assert "time '1' (60 s) is not longer than time_signal_s=90" in flat and "launch" in flat


def test_a_percent_in_the_output_directory_is_refused_before_anything_is_submitted(slurm_cluster, tmp_path):
    path = write_experiment(tmp_path, "pct", ZERO)
    out = tmp_path / "q_%j_%x"
    for extra in ([], ["--dry-run"]):
        result = arena("run", path, "--output-dir", out, *extra, timeout=120)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "contains '%', which #SBATCH --output expands" in " ".join(result.stderr.split())
    assert not (out / "submission.json").exists()
    queue = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, env=slurm_cluster.env())
    assert "pct" not in queue.stdout


def test_a_job_sbatch_refuses_is_recorded_failed_naming_the_option(slurm_cluster, tmp_path):
    path = write_experiment(tmp_path, "huge", ZERO, memory=500)  # GiB; the node has 8000 MB
    out = tmp_path / "out"
    submitted = arena("run", path, "--output-dir", out, timeout=120)
    assert submitted.returncode == 3, submitted.stdout + submitted.stderr
    said = " ".join(submitted.stderr.split())
    assert "run zero was not submitted: sbatch refused zero.sbatch" in said and "launch.slurm.memory" in said
    assert state_of(out / "zero" / "status.json")["state"] == "failed"  # not pending forever
    status = arena("status", out, timeout=120)
    assert status.returncode == 0, status.stderr
    flat = " ".join(status.stdout.replace("│", " ").split())
    assert "zero failed" in flat and "launch.slurm.memory" in flat
    collected = arena("collect", out, timeout=120)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    run = json.loads((out / "experiment_result.json").read_text())["runs"]["zero"]
    assert run["state"] == "failed" and "launch.slurm.memory" in run["error"]


def test_a_time_limit_warning_during_the_setup_lines_ends_the_run_failed_with_why(slurm_cluster, tmp_path):
    """The USR1 warning used to kill bash when it came before the trap was set (set-up lines run
    first): FAILED with ExitCode 0:10 and an empty log. Here it is sent while `sleep 6` runs."""
    runs = {"zero": {**ZERO["zero"], "rollout_limit": {"num_episodes": 200, "max_episode_steps": 40}}}
    path = write_experiment(tmp_path, "early", runs, time="10", setup=[*slurm_options()["setup"], "sleep 6"])
    out = tmp_path / "out"
    submitted = arena("run", path, "--output-dir", out, timeout=120)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job = json.loads((out / "submission.json").read_text())["ids"]["zero"]["0"]
    env = slurm_cluster.env()

    def running() -> bool:
        squeue = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, env=env)
        return squeue.stdout.strip() == "RUNNING"

    wait_for(running, 60, f"job {job} never ran", slurm_cluster)
    time.sleep(1)  # inside the 6 s set-up line
    subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True, env=env)
    wait_for(lambda: state_of(out / "zero" / "status.json").get("state") == "failed", 60,
             "the job never recorded its end", slurm_cluster)
    error = state_of(out / "zero" / "status.json")["error"]
    assert "stopped at the time limit (launch.slurm.time=10)" in error, error
    assert arena("cancel", out, timeout=120).returncode == 0


def test_sigterm_to_a_waiting_run_says_the_jobs_keep_running_and_a_failed_wait_hints_resume(slurm_cluster, tmp_path):
    import signal
    import sys

    runs = {"long": {**ZERO["zero"], "rollout_limit": {"num_episodes": 2000, "max_episode_steps": 40}}}
    path = write_experiment(tmp_path, "waited", runs)
    out = tmp_path / "out"
    waiting = subprocess.Popen([sys.executable, "-m", "arena", "run", str(path), "--wait", "--output-dir", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: state_of(out / "long" / "status.json").get("state") == "running", 90, "the job never ran",
                 slurm_cluster)
        waiting.send_signal(signal.SIGTERM)
        stdout, stderr = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 143, stdout + stderr
    said = " ".join(stdout.split())
    assert "stopped waiting; the slurm jobs keep running" in said and f"arena cancel {out}" in said
    assert "run the rest with" not in said  # a resume would be refused while the job runs
    assert state_of(out / "long" / "status.json").get("state") == "running"  # it does keep running
    assert arena("cancel", out, timeout=120).returncode == 0

    broken = {"broken": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"},
                         "server": {"local_command": ["{python}", "-c", "raise SystemExit(1)"], "startup_timeout_s": 30}}}
    out = tmp_path / "failed"
    result = arena("run", write_experiment(tmp_path, "broken", broken), "--wait", "--output-dir", out, timeout=240)
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"arena run --resume {out}" in " ".join(result.stdout.split())


def test_a_job_slurm_ends_at_its_time_limit_is_failed_not_cancelled(slurm_cluster, tmp_path):
    """The limit lowered under a running job with a policy server (`scontrol update TimeLimit=1`
    after a minute): the runner sees only Slurm's SIGTERM and records `cancelled`; Slurm's
    TIMEOUT says failed."""
    runs = {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"},
                       "rollout_limit": {"num_episodes": 5000, "max_episode_steps": 40}}}
    path = write_experiment(tmp_path, "timed", runs)
    out = tmp_path / "out"
    assert arena("run", path, "--output-dir", out, timeout=120).returncode == 0
    job = json.loads((out / "submission.json").read_text())["ids"]["expert"]["0"]
    env = slurm_cluster.env()
    wait_for(lambda: state_of(out / "expert" / "status.json").get("state") == "running", 120, "the run never ran",
             slurm_cluster)
    time.sleep(62)  # a limit already passed: Slurm ends the job at once, no USR1 notice first
    subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=1"], check=True, env=env)

    def ended() -> bool:
        squeue = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, env=env)
        return squeue.returncode == 0 and not squeue.stdout.strip()

    wait_for(ended, 150, f"job {job} did not end at its time limit", slurm_cluster)
    status = arena("status", out, timeout=120)
    flat = " ".join(status.stdout.replace("│", " ").split())
    assert "expert failed" in flat and "cancelled" not in flat, status.stdout
    assert arena("collect", out, timeout=120).returncode == 0
    result = json.loads((out / "expert" / "run_result.json").read_text())
    assert result["state"] == "failed" and "time limit" in result["error"], result
    assert json.loads((out / "experiment_result.json").read_text())["runs"]["expert"]["state"] == "failed"


def test_sigkill_of_arena_run_while_sbatch_runs_leaves_a_job_arena_still_finds(slurm_cluster, tmp_path):
    """arena run killed (SIGKILL) while sbatch is submitting: the job is queued but was never
    written to submission.json; `arena status` and `arena cancel` still find it (its comment)."""
    import os
    import shutil
    import signal
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "sbatch"  # the real sbatch, 4 s late: time to kill arena while it waits
    slow.write_text(f"#!/bin/sh\nsleep 4\nexec {shutil.which('sbatch')} \"$@\"\n")
    slow.chmod(0o755)
    env = {**slurm_cluster.env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    runs = {"long": {**ZERO["zero"], "rollout_limit": {"num_episodes": 2000, "max_episode_steps": 40}}}
    path = write_experiment(tmp_path, "killed", runs)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: "long" in (json.loads((out / "submission.json").read_text()).get("extra", {}).get("submitting", {})
                                if (out / "submission.json").exists() else {}), 60, "sbatch never started", slurm_cluster)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    time.sleep(6)  # the orphaned sbatch submits meanwhile
    status = arena("status", out, timeout=120)
    assert status.returncode == 0, status.stderr
    assert "long" in status.stdout  # the job arena never recorded is found
    job = json.loads((out / "submission.json").read_text())["ids"]["long"]["0"]
    assert arena("cancel", out, timeout=120).returncode == 0
    wait_for(lambda: not subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True,
                                        env=slurm_cluster.env()).stdout.strip(), 60, f"job {job} was not cancelled",
             slurm_cluster)
