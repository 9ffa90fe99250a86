"""The local launch backend as a user sees it: `arena run` starts, shares and stops servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

EXPERT = {"type": "metaworld_expert_remote"}
REACH = {"type": "metaworld", "task": "reach-v3"}


def write_experiment(tmp_path: Path, runs: dict, shared: dict | None = None, launch: dict | None = None) -> Path:
    doc = {
        "launch": launch or {"backend": "local", "local": {"jobs": 2}},
        "shared": shared or {"environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": 4}},
        "runs": runs,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def arena_run(path: Path, out: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_two_runs_share_one_server_and_it_is_stopped(tmp_path):
    path = write_experiment(
        tmp_path,
        {"a": {"environment": REACH, "policy": EXPERT}, "b": {"environment": REACH, "policy": EXPERT}},
    )
    out = tmp_path / "out"
    result = arena_run(path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    logs = list((out / "servers").glob("*.log"))
    assert len(logs) == 1, logs
    servers = [read_json(out / run / "run_result.json")["server"] for run in ("a", "b")]
    assert servers[0]["port"] == servers[1]["port"]
    assert not pid_alive(servers[0]["pid"])
    for run in ("a", "b"):
        assert (out / run / "server.log").exists()
        assert read_json(out / run / "run_result.json")["state"] == "completed"
    assert "report:" in result.stdout
    from arena.outputs.workqueue import WorkQueue

    for run in ("a", "b"):  # the runners claimed their episodes from the work queue (the default), each once
        assert WorkQueue(out / "queue.sqlite").claims(run) == {i: 1 for i in range(4)}


def test_server_that_never_becomes_ready_fails_its_run_only(tmp_path):
    hang = {
        "local_command": ["{python}", "-c", "import time; print('loading forever', flush=True); time.sleep(600)"],
        "readiness": "tcp",
        "startup_timeout_s": 2,
    }
    path = write_experiment(
        tmp_path,
        {
            "stuck": {"environment": REACH, "policy": EXPERT, "server": hang},
            "fine": {"environment": REACH, "policy": {"type": "zero_action"}},
        },
    )
    out = tmp_path / "out"
    started = time.monotonic()
    result = arena_run(path, out)
    assert result.returncode == 3
    assert time.monotonic() - started < 120
    stuck = read_json(out / "stuck" / "run_result.json")
    assert stuck["state"] == "failed"
    assert "not ready" in stuck["error"] and "startup_timeout_s=2" in stuck["error"]
    assert read_json(out / "stuck" / "status.json")["state"] == "failed"
    assert "loading forever" in (out / "stuck" / "server.log").read_text()
    fine = read_json(out / "fine" / "run_result.json")
    assert fine["state"] == "completed"
    assert fine["counts"]["timeout"] == 4
    assert subprocess.run(["pgrep", "-f", "loading forever"], capture_output=True).returncode == 1


def test_external_server_is_used_as_is(tmp_path, policy_server):
    server = policy_server("metaworld-expert")
    policy = {**EXPERT, "remote_host": "127.0.0.1", "remote_port": server.port}
    path = write_experiment(tmp_path, {"ext": {"environment": REACH, "policy": policy, "server": {"external": True}}})
    out = tmp_path / "out"
    result = arena_run(path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (out / "servers").exists()
    run_result = read_json(out / "ext" / "run_result.json")
    assert run_result["counts"]["success"] == 4


def test_image_only_server_task_is_refused_before_anything_starts(tmp_path):
    path = write_experiment(
        tmp_path,
        {"gpu": {"environment": REACH, "policy": EXPERT, "server": {"local_command": [], "image": "nvcr.io/x/y:1"}}},
    )
    out = tmp_path / "out"
    result = arena_run(path, out)
    assert result.returncode == 2
    assert "cannot run containers" in result.stderr and "slurm" in result.stderr
    assert "run 'gpu'" in result.stderr
    assert not out.exists()


def test_ctrl_c_stops_servers_and_keeps_finished_episodes(tmp_path):
    path = write_experiment(
        tmp_path,
        {"long": {"environment": REACH, "policy": {**EXPERT}}},
        shared={"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 400}},
        launch={"backend": "local", "local": {"jobs": 1}},
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    records = out / "long" / "episodes.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if records.exists() and len(records.read_text().splitlines()) >= 2:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("no episode finished in time")
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert f"run the rest with: arena run --resume {out}" in " ".join(output.split())
    finished = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(finished) >= 2
    assert all(r["outcome"] == "success" for r in finished)
    result = read_json(out / "long" / "run_result.json")
    assert result["state"] == "cancelled"
    assert result["counts"]["success"] >= 2
    assert not pid_alive(result["server"]["pid"])
    assert read_json(out / "experiment_result.json")["runs"]["long"]["state"] == "cancelled"


def test_dry_run_prints_runs_and_server_tasks_and_starts_nothing(tmp_path):
    path = write_experiment(tmp_path, {"a": {"environment": REACH, "policy": EXPERT}})
    out = tmp_path / "out"
    result = arena_run(path, out, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "metaworld-expert" in result.stdout and "run-one" in result.stdout
    assert not out.exists()


def test_status_and_report_commands_read_the_output_directory(tmp_path):
    path = write_experiment(tmp_path, {"z": {"environment": REACH, "policy": {"type": "zero_action"}}})
    out = tmp_path / "out"
    assert arena_run(path, out).returncode == 0
    (out / "index.html").unlink()
    status = subprocess.run([sys.executable, "-m", "arena", "status", str(out)], capture_output=True, text=True)
    assert status.returncode == 0 and "completed" in status.stdout
    report = subprocess.run([sys.executable, "-m", "arena", "report", str(out)], capture_output=True, text=True)
    assert report.returncode == 0 and (out / "index.html").exists()
    assert read_json(out / "submission.json")["backend"] == "local"
