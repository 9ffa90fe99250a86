"""What a cluster does to long evaluations, on the real one-node Slurm cluster (see conftest.py):
jobs killed and resumed, jobs that can never start, time limits, a policy server that dies,
memory requests. Episodes are short (zero-action or random policies, tens of steps).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from slurm_testkit import REACH, ROOT, arena, outcomes, results, state_of, wait_for, write_experiment  # noqa: F401

pytestmark = pytest.mark.slow


def _status_lines(out) -> str:
    done = arena("status", out)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_job_that_can_never_start_says_why_and_wait_fails_its_run_naming_the_option(slurm_cluster, tmp_path):
    runs = {"greedy": {"environment": REACH, "policy": {"type": "zero_action"}}}
    path = write_experiment(tmp_path, "greedy", runs, cpus=64)  # the node has 8
    out = tmp_path / "out"
    submitted = arena("run", path, "--backend", "slurm", "--output-dir", out)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: "PartitionConfig" in _status_lines(out), 60, "squeue never gave the pending reason", slurm_cluster)
    status = _status_lines(out)
    assert "pending" in status and "Slurm will never start job" in status
    assert "lower launch.slurm.cpus" in status.replace("\n", " ")
    assert arena("cancel", out).returncode == 0

    out = tmp_path / "waited"
    started = time.monotonic()
    waited = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out, timeout=240)
    assert waited.returncode == 3, waited.stdout[-3000:] + waited.stderr[-3000:]
    assert time.monotonic() - started < 200  # stopped waiting instead of forever
    run = results(out)["greedy"]
    assert run["state"] == "failed" and "PartitionConfig" in run["error"] and "launch.slurm.cpus" in run["error"]


def _job_of(out, run: str) -> str:
    return json.loads((out / "submission.json").read_text())["ids"][run]["0"]


def test_a_time_limit_ends_the_run_failed_naming_launch_slurm_time_and_keeps_its_episodes(slurm_cluster, tmp_path):
    # Slurm signals the batch shell 30-90 s before the 2-minute limit (--signal=B:USR1@30); the
    # job script passes it to run-one, which stops and records why: no "cancelled by signal".
    runs = {
        "long": {
            "environment": REACH,
            "policy": {"type": "zero_action"},
            "rollout_limit": {"num_episodes": 20000, "max_episode_steps": 200},  # hours of work
        }
    }
    path = write_experiment(tmp_path, "limited", runs, time="2", time_signal_s=30)
    out = tmp_path / "out"
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out, timeout=400)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:] + slurm_cluster.logs()
    run = results(out)["long"]
    assert run["state"] == "failed", run
    assert "stopped at the time limit (launch.slurm.time=2)" in run["error"], run["error"]
    assert f"arena run --resume {out}" in run["error"]
    assert run["episodes_recorded"] == len(outcomes(out, "long")) < 20000  # what finished is kept
    status = _status_lines(out)
    assert "failed" in status and "launch.slurm.time" in status.replace("\n", " ").replace("│", "")
    # the job itself ended before Slurm's limit: run-one wrote the result, not the scheduler
    job = subprocess.run(["scontrol", "show", "job", _job_of(out, "long")], capture_output=True, text=True)
    assert "JobState=TIMEOUT" not in job.stdout, job.stdout


CRASHING_SERVER = """
import os, runpy, socket, sys, threading, time
host, port = sys.argv[1], int(sys.argv[2])
def crash_once_serving():
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    time.sleep(3)
    print("simulated crash: the model process died", flush=True)
    os._exit(7)
threading.Thread(target=crash_once_serving, daemon=True).start()
sys.argv = ["arena", "serve", "metaworld-expert", "--host", host, "--port", str(port)]
runpy.run_module("arena", run_name="__main__")
"""


def test_a_server_that_keeps_dying_is_restarted_then_the_run_fails_fast_with_its_log(slurm_cluster, tmp_path):
    runs = {
        "expert": {
            "environment": REACH,
            "policy": {"type": "metaworld_expert_remote"},
            "server": {"local_command": ["{python}", "-c", CRASHING_SERVER, "{host}", "{port}"], "startup_timeout_s": 120},
            "rollout_limit": {"num_episodes": 2000, "max_episode_steps": 40},
        }
    }
    path = write_experiment(tmp_path, "crashing", runs, server_restarts=1, server_stop_grace_s=5)
    out = tmp_path / "out"
    started = time.monotonic()
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out, timeout=400)
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:] + slurm_cluster.logs()
    assert time.monotonic() - started < 300  # failed fast, not after 2000 error episodes
    run = results(out)["expert"]
    assert run["state"] == "failed", run
    assert "exited with code 7 and was restarted 1 time(s) (launch.slurm.server_restarts=1)" in run["error"], run["error"]
    assert "simulated crash: the model process died" in run["error"]
    log = (out / "expert" / "server.log").read_text()
    assert "restart 1 of 1" in log and log.count("serving metaworld-expert") == 2, log


DEAF_SERVER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = subprocess.Popen([sys.executable, "-m", "arena", "serve", "metaworld-expert", "--host", sys.argv[1], "--port", sys.argv[2]])
server.wait()
time.sleep(600)  # lingers after its server stopped: only SIGKILL ends it
"""


def test_a_jobs_memory_covers_runner_and_server_and_a_server_deaf_to_sigterm_is_killed_after_the_grace(
    slurm_cluster, tmp_path
):
    # Memory is a consumable resource on the test cluster (CR_Core_Memory): the job asks for
    # the sum, each step for its own share.
    runs = {
        "expert": {
            "environment": REACH,
            "policy": {"type": "metaworld_expert_remote"},
            "server": {"local_command": ["{python}", "-c", DEAF_SERVER, "{host}", "{port}"], "resources": {"memory": 0.5}},
        }
    }
    path = write_experiment(tmp_path, "memory", runs, memory=0.75, server_stop_grace_s=3)
    out = tmp_path / "out"
    result = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + slurm_cluster.logs()
    assert results(out)["expert"]["state"] == "completed"
    job = subprocess.run(["scontrol", "show", "job", _job_of(out, "expert")], capture_output=True, text=True)
    assert "MinMemoryNode=1280M" in job.stdout, job.stdout
    script = (out / "slurm" / "expert.node.json").read_text()  # the steps arena node starts
    assert "--mem=512M" in script and "--mem=768M" in script
    log = (out / "expert" / "server.log").read_text()
    assert "SIGTERM, SIGKILL after 3 s" in log and "did not stop within 3 s: SIGKILL" in log, log


def test_a_cancelled_run_resumed_records_every_episode_of_an_uninterrupted_run(slurm_cluster, tmp_path):
    runs = {
        "random": {
            "environment": REACH,
            "policy": {"type": "random_action"},
            "rollout_limit": {"num_episodes": 300, "max_episode_steps": 150},
        }
    }
    path = write_experiment(tmp_path, "resumed", runs)
    out = tmp_path / "out"
    submitted = arena("run", path, "--backend", "slurm", "--output-dir", out)
    assert submitted.returncode == 0, submitted.stderr
    status = out / "random" / "status.json"
    wait_for(lambda: state_of(status).get("episodes_done", 0) >= 3, 180, "the run recorded no episodes", slurm_cluster)
    assert arena("cancel", out).returncode == 0
    assert state_of(status)["state"] == "cancelled"
    interrupted = outcomes(out, "random")
    assert 3 <= len(interrupted) < 300

    resumed = arena("run", "--resume", out, "--wait")
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:] + slurm_cluster.logs()
    assert "resuming" in resumed.stdout
    local = tmp_path / "local"
    done = arena("run", path, "--backend", "local", "--output-dir", local)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert outcomes(out, "random") == outcomes(local, "random")  # seed, outcome, steps, return of all 300
    assert len(outcomes(out, "random")) == 300
    assert results(out)["random"]["state"] == "completed"


def test_a_job_whose_arena_command_is_missing_on_the_node_fails_naming_it_before_its_server_starts(slurm_cluster, tmp_path):
    runs = {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}
    missing = tmp_path / "no-venv" / "bin" / "arena"  # launch.slurm.arena pointing where no arena was installed
    path = write_experiment(tmp_path, "noarena", runs, arena=str(missing))
    out = tmp_path / "out"
    started = time.monotonic()
    waited = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out, timeout=180)
    assert waited.returncode == 3, waited.stdout[-3000:] + waited.stderr[-3000:]
    assert time.monotonic() - started < 90, "the job should end as it starts, not at a timeout"
    run = results(out)["expert"]
    assert run["state"] == "failed", run
    assert f"`{missing}` is not a command on the node" in run["error"] and "launch.slurm.arena" in run["error"], run["error"]
    flat = " ".join(_status_lines(out).replace("│", " ").split())  # what `arena status` shows
    assert "failed" in flat and "launch.slurm.arena" in flat, flat
    assert not (out / "expert" / "server.log").exists()  # nothing started: no server, no episodes
    assert not (out / "expert" / "episodes.jsonl").exists()


FAKES = ROOT / "tests" / "rollout"


def test_a_job_killed_mid_run_has_its_leased_episodes_run_by_the_other_job_each_once(
    slurm_cluster, tmp_path, monkeypatch
):
    # work: queue (the default), two jobs of one run. Each runner records its first episode and
    # then holds in its second (the hold file) until the test removes the file: one job is then
    # killed outright (SIGKILL to every process of it: nothing can release its lease), and the
    # other job runs the rest, the killed job's leased episode included once its lease lapsed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ARENA_ALLOW_IMPORTS", "rollout_fakes")
    hold = tmp_path / "hold"
    hold.touch()
    episodes = 8
    runs = {"count": {
        "environment": {"type": "rollout_fakes:CounterEnv", "hold_file": str(hold)},
        "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
        "rollout_limit": {"num_episodes": episodes},
    }}
    path = write_experiment(tmp_path, "queued", runs, shards=2, lease_s=2)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "arena", "run", str(path), "--wait", "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        shard_status = [out / "count" / "shards" / str(k) / "status.json" for k in (0, 1)]
        wait_for(lambda: all(state_of(s).get("episodes_done", 0) >= 1 for s in shard_status), 180,
                 "both jobs did not record their first episode", slurm_cluster)
        from arena.outputs.workqueue import WorkQueue

        assert WorkQueue(out / "queue.sqlite").counts("count")["leased"] == 2  # each job holds its second
        killed = json.loads((out / "submission.json").read_text())["ids"]["count"]["1"]
        done = subprocess.run(["scancel", "--full", "--signal=KILL", killed], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: killed not in subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True,
                                                      text=True).stdout.split(), 60,
                 f"job {killed} did not leave the queue", slurm_cluster)
        hold.unlink()
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-3000:] + slurm_cluster.logs()
    got = outcomes(out, "count")
    assert [o[0] for o in got] == list(range(episodes)), output[-3000:]  # each episode once: none lost, none twice
    claims = WorkQueue(out / "queue.sqlite").claims("count")
    assert max(claims.values()) == 2 and sum(claims.values()) == episodes + 1  # only the killed job's lease ran again
    local = tmp_path / "local"
    done = arena("run", path, "--backend", "local", "--output-dir", local)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert got == outcomes(local, "count")
    run, plain = results(out)["count"], results(local)["count"]
    assert run["state"] == "completed", run
    for key in ("counts", "success_rate", "episodes_recorded"):
        assert run.get(key) == plain.get(key), key
