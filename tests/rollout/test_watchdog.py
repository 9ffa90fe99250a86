"""The run-one watchdog: stalls (by status.json progress, not stdout) are killed and resumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from arena.config.models import WatchdogConfig
from arena.outputs.records import read_records
from arena.rollout.watchdog import supervise

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# A stand-in for `arena run-one`: writes status.json like it, behaves as MODE says.
CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    work, mode = sys.argv[1], sys.argv[2]
    resume = "--resume" in sys.argv
    status_path = os.path.join(work, "status.json")
    attempts_path = os.path.join(work, "attempts")
    attempt = int(open(attempts_path).read()) + 1 if os.path.exists(attempts_path) else 1
    open(attempts_path, "w").write(str(attempt))
    old = json.load(open(status_path)) if os.path.exists(status_path) else {}
    done = old.get("episodes_done", 0) if resume else 0

    def write(state="running", **extra):
        data = dict(old, state=state, episodes_done=done, episodes_total=4, last_progress_at=time.time(), **extra)
        tmp = status_path + ".tmp"
        json.dump(data, open(tmp, "w"))
        os.replace(tmp, status_path)

    write()
    if mode == "silent":
        while True:
            print("chatty but stuck", flush=True)  # stdout is not progress
            time.sleep(0.05)
    if mode == "crash" and attempt == 1:
        done += 1
        write()
        os._exit(1)
    if mode == "config":
        sys.exit(2)
    if mode == "slow_start":
        time.sleep(1.0)  # silent cold start, inside the grace period
    while done < 4:
        time.sleep(0.05)
        done += 1
        write()
        if mode == "hang" and attempt == 1 and done == 2:
            time.sleep(3600)
    write("completed")
    """
)


def _supervise(tmp_path, mode, **config):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    work = tmp_path / "run"
    work.mkdir(exist_ok=True)
    cfg = WatchdogConfig(**{"stall_s": 0.6, "first_episode_grace_s": 0.6, "max_restarts": 2, **config})
    code = supervise(
        [sys.executable, str(script), str(work), mode], work, cfg, run="r", episodes_total=4, poll_s=0.05, kill_grace_s=2
    )
    status = json.loads((work / "status.json").read_text())
    attempts = int((work / "attempts").read_text())
    return code, status, attempts, work


def test_a_stalled_rollout_is_killed_and_resumed_and_the_restart_recorded(tmp_path):
    code, status, attempts, _ = _supervise(tmp_path, "hang")
    assert code == 0 and attempts == 2
    assert status["state"] == "completed" and status["episodes_done"] == 4
    assert status["restarts"] == 1
    assert "no progress for 0.6 s" in status["restart_history"][0]["reason"]


def test_output_on_stdout_without_progress_is_a_stall_and_the_run_fails_after_max_restarts(tmp_path):
    code, status, attempts, work = _supervise(tmp_path, "silent", max_restarts=1)
    assert code == 3 and attempts == 2
    assert status["state"] == "failed" and status["restarts"] == 1
    assert "gave up after 1 restart" in status["error"]
    result = json.loads((work / "run_result.json").read_text())
    assert result["state"] == "failed" and "no episode finished" in result["error"]


def test_a_silent_cold_start_within_the_grace_period_is_not_a_stall(tmp_path):
    code, status, attempts, _ = _supervise(tmp_path, "slow_start", stall_s=0.4, first_episode_grace_s=5)
    assert code == 0 and attempts == 1 and status.get("restarts", 0) == 0


def test_a_crashed_rollout_is_resumed(tmp_path):
    code, status, attempts, _ = _supervise(tmp_path, "crash")
    assert code == 0 and attempts == 2 and status["restarts"] == 1
    assert "exited with code 1" in status["restart_history"][0]["reason"]


def test_a_configuration_error_is_not_retried(tmp_path):
    code, _, attempts, _ = _supervise(tmp_path, "config")
    assert code == 2 and attempts == 1


@pytest.mark.slow
def test_run_one_with_launch_watchdog_resumes_a_wedged_policy_with_the_same_outcomes(tmp_path):
    """End to end through `arena run-one`: a policy wedges once; the run still completes."""
    snapshot = {
        "launch": {"watchdog": {"stall_s": 2, "first_episode_grace_s": 20, "max_restarts": 2}},
        "runs": {
            "count": {
                "environment": {"type": "rollout_fakes:CounterEnv"},
                "policy": {"type": "rollout_fakes:HangOncePolicy", "hang_seed": 3, "marker_dir": str(tmp_path)},
                "environment_builder": {"num_envs": 2, "seed": 0},
                "rollout_limit": {"num_episodes": 6},
            }
        },
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(snapshot))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run-one", str(path), "--run", "count", "--output-dir", str(out),
         "--allow-import", "rollout_fakes"],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert time.monotonic() - started < 60
    status = json.loads((out / "count" / "status.json").read_text())
    assert status["state"] == "completed" and status["restarts"] == 1 and len(status["restart_history"]) == 1
    records, _ = read_records(out / "count" / "episodes.jsonl")
    from rollout_fakes import expected_outcome

    assert sorted(r.episode_index for r in records) == list(range(6))
    assert all(r.outcome == expected_outcome(r.seed) for r in records)
    assert "restart 1 of 2" in result.stderr


def test_the_time_limit_signal_reaches_a_supervised_rollout_which_fails_naming_the_limit(tmp_path):
    """SIGUSR1 to the supervisor (what srun forwards before a Slurm time limit) stops the child,
    which records `failed` with the limit; nothing is restarted and the records are kept."""
    import signal

    snapshot = {
        "launch": {"watchdog": {"stall_s": 30, "first_episode_grace_s": 60, "max_restarts": 2}},
        "runs": {
            "count": {
                "environment": {"type": "rollout_fakes:CounterEnv", "step_delay_s": 0.05},
                "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
                "environment_builder": {"num_envs": 1, "seed": 0},
                "rollout_limit": {"num_episodes": 40},
            }
        },
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(snapshot))
    out = tmp_path / "out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "ARENA_ALLOW_IMPORTS": "rollout_fakes",
        "ARENA_TIME_LIMIT": "launch.slurm.time=00:05:00",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "run-one", str(path), "--run", "count", "--output-dir", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 120
        while len(read_records(out / "count" / "episodes.jsonl")[0]) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the rollout ended before the signal"
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR1)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, stderr[-3000:]
    status = json.loads((out / "count" / "status.json").read_text())
    result = json.loads((out / "count" / "run_result.json").read_text())
    assert status["state"] == result["state"] == "failed"
    assert "stopped at the time limit (launch.slurm.time=00:05:00)" in result["error"]
    assert status.get("restarts", 0) == 0
    records, _ = read_records(out / "count" / "episodes.jsonl")
    assert 2 <= len(records) < 40
