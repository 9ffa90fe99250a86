"""A stop that arrives once every episode is recorded (while the environment is still closing)
leaves a completed run: the final state follows the records. And a resume of a run with
nothing left to do finishes its bookkeeping (states, result, sinks) instead of refusing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

EPISODES = 3


def _experiment(tmp_path: Path, events: Path, close_delay_s: float) -> Path:
    experiment = {
        "tracking": {"rec": {"type": "arena.testing.sinks:RecordingSink", "path": str(events)}},
        "runs": {"reach": {
            "environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False, "max_steps": 4,
                            "close_delay_s": close_delay_s},
            "policy": {"type": "random_action"},
            "environment_builder": {"num_envs": 1, "seed": 0},
            "rollout_limit": {"num_episodes": EPISODES},
        }},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def start_and_signal_while_closing(tmp_path: Path, sig: int, close_delay_s: float, extra: dict | None = None):
    """``arena run`` of a 3-episode run whose environment takes ``close_delay_s`` to close; once
    its last record is written, ``sig`` goes to the whole process group (Ctrl-C, a kill)."""
    events = tmp_path / "events.jsonl"
    path = _experiment(tmp_path, events, close_delay_s)
    if extra:
        data = yaml.safe_load(path.read_text())
        data["tracking"].update(extra)
        path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while _lines(out / "reach" / "episodes.jsonl") < EPISODES:
            assert proc.poll() is None, "the run ended before its last record: " + (proc.stdout.read() if proc.stdout else "")
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(proc.pid, sig)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, output, out, events


def test_ctrl_c_while_the_environment_closes_after_the_last_record_leaves_the_run_completed(tmp_path):
    code, output, out, events = start_and_signal_while_closing(tmp_path, signal.SIGINT, close_delay_s=3.0)
    assert code == 0, output  # every run recorded everything: complete, not "interrupted"
    assert "the experiment is complete" in output, output
    result = json.loads((out / "reach" / "run_result.json").read_text())
    assert result["state"] == "completed" and result["error"] is None and result["episodes"] == EPISODES
    assert json.loads((out / "reach" / "status.json").read_text())["state"] == "completed"
    run = json.loads((out / "experiment_result.json").read_text())["runs"]["reach"]
    assert run["state"] == "completed" and run["partial"] is False
    sent = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert "experiment_finished" in sent  # the sinks' experiment end was raised
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)  # compare refuses one directory against itself
    compare = subprocess.run([sys.executable, "-m", "arena", "compare", str(out), str(twin)],
                             capture_output=True, text=True, timeout=120)
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_resume_of_a_killed_run_with_every_episode_recorded_finishes_its_bookkeeping(tmp_path, monkeypatch):
    # SIGKILL while the environment closes: no final state, no result, the sinks never told
    mlflow = importlib.util.find_spec("arena_mlflow") is not None and importlib.util.find_spec("mlflow") is not None
    extra = None
    if mlflow:  # MLflow's file store (a new SQLite store takes ~15 s to create)
        monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        extra = {"mlflow": {"tracking_uri": (tmp_path / "mlruns").as_uri(), "experiment_name": "killed", "max_videos": 0}}
    code, _, out, events = start_and_signal_while_closing(tmp_path, signal.SIGKILL, close_delay_s=30.0, extra=extra)
    assert code == -signal.SIGKILL
    runner = int(json.loads((out / "submission.json").read_text())["ids"]["reach"]["0"])
    deadline = time.monotonic() + 30  # its keeper stops the orphaned runner (SIGTERM, SIGKILL after 5 s)
    while _alive(runner):
        assert time.monotonic() < deadline, "the orphaned runner was not stopped"
        time.sleep(0.1)
    assert json.loads((out / "reach" / "status.json").read_text())["state"] == "running"
    before = (out / "reach" / "episodes.jsonl").read_bytes()
    resume = subprocess.run([sys.executable, "-m", "arena", "run", "--resume", str(out)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert resume.returncode == 0, resume.stdout + resume.stderr  # was exit 3 "nothing to resume"
    assert "nothing to resume" in resume.stdout and "completed" in resume.stdout
    assert (out / "reach" / "episodes.jsonl").read_bytes() == before  # nothing ran again
    result = json.loads((out / "reach" / "run_result.json").read_text())
    assert result["state"] == "completed" and result["counts"] == json.loads(
        (out / "experiment_result.json").read_text())["runs"]["reach"]["counts"]
    assert json.loads((out / "reach" / "status.json").read_text())["state"] == "completed"
    sent = [json.loads(line) for line in events.read_text().splitlines()]
    finished = [e for e in sent if e["event"] == "run_finished"]
    assert [e["result"]["state"] for e in finished] == ["completed"]
    assert [e["event"] for e in sent].count("experiment_finished") == 1
    status = subprocess.run([sys.executable, "-m", "arena", "status", str(out)], capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "completed" in status.stdout and f"{EPISODES}/{EPISODES}" in status.stdout
    if mlflow:  # the parent run, left RUNNING with no metrics by the kill, is finished with them
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
        (parent,) = client.search_runs([client.get_experiment_by_name("killed").experiment_id])
        assert parent.info.status == "FINISHED" and parent.data.metrics["reach/n"] == EPISODES
