"""An early-stopping run interrupted with Ctrl-C (SIGINT) and resumed gives the uninterrupted result."""

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

from arena.outputs.records import read_records
from arena.rollout.run_one import run_one

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "rollout"
if str(FAKES) not in sys.path:  # the run names its env and policy as rollout_fakes:Class
    sys.path.insert(0, str(FAKES))

from rollout_fakes import count_lines, fakes_env  # noqa: E402 - importable once FAKES is on the path


@pytest.mark.slow
def test_ctrl_c_before_the_rule_stops_then_resume_gives_the_uninterrupted_stop(tmp_path):
    from rollout_fakes import expected_outcome

    from arena.outputs.stopping import SeedOrderStop

    rule = {"threshold": 0.7}
    expected = SeedOrderStop(rule, range(120))
    expected.feed({i: expected_outcome(i) for i in range(120)})
    stop_at = expected.decision.episodes  # 45 with these seeds
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "launch": {"backend": "local"},
        "runs": {"count": {
            "environment": {"type": "rollout_fakes:CounterEnv", "step_delay_s": 0.03},
            "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
            "environment_builder": {"num_envs": 3, "seed": 0},
            "rollout_limit": {"num_episodes": 120, "stop_when": rule},
        }},
    }))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), "--allow-import", "rollout_fakes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=fakes_env(), cwd=ROOT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while count_lines(out / "count" / "episodes.jsonl") < 5:
            assert proc.poll() is None, "the run finished before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    interrupted, _ = read_records(out / "count" / "episodes.jsonl")
    assert 5 <= len(interrupted) < stop_at
    first = json.loads((out / "count" / "run_result.json").read_text())
    assert first["state"] == "cancelled" and first.get("stop") is None

    resumed = subprocess.run([sys.executable, "-m", "arena", "run", "--resume", str(out)],
                             capture_output=True, text=True, timeout=300, env=fakes_env(), cwd=ROOT)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    reference = tmp_path / "reference"
    assert run_one(out / "experiment.yaml", "count", reference) == 0
    got = json.loads((out / "count" / "run_result.json").read_text())
    want = json.loads((reference / "count" / "run_result.json").read_text())
    assert got["state"] == "completed"
    for key in ("episodes_used", "decision", "sequence_ci", "successes", "reason"):
        assert got["stop"][key] == want["stop"][key], key
    assert got["stop"]["episodes_used"] == stop_at and got["counts"] == want["counts"]
    result = json.loads((out / "experiment_result.json").read_text())["runs"]["count"]
    assert result["partial"] is False and result["n"] == stop_at

    again = subprocess.run([sys.executable, "-m", "arena", "run", "--resume", str(out)],
                           capture_output=True, text=True, timeout=300, env=fakes_env(), cwd=ROOT)
    assert again.returncode == 0 and "nothing to resume" in again.stdout  # its remaining items are never run


def test_a_stopped_runs_error_episode_is_resumed_without_reopening_the_stop(tmp_path):
    """Issue 49 item 9: the rule skips an error episode and stops; `arena run --resume` runs
    that episode again (exit 0 once it passes), keeps the stopping index and runs nothing past
    it, and a second resume has nothing left (it used to exit 3 forever)."""
    from rollout_fakes import expected_outcome

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "launch": {"backend": "local"},
        "runs": {"count": {
            "environment": {"type": "rollout_fakes:CounterEnv"},
            "policy": {"type": "rollout_fakes:CoinFlipPolicy", "error_seeds": [2], "error_once_dir": str(tmp_path)},
            "environment_builder": {"num_envs": 1, "seed": 0},
            "rollout_limit": {"num_episodes": 20, "stop_when": {"threshold": 0.2}},
        }},
    }))
    out = tmp_path / "out"

    def arena_run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "arena", "run", *args], capture_output=True, text=True, timeout=300,
                              env=fakes_env(), cwd=ROOT)

    first = arena_run(str(path), "--output-dir", str(out), "--allow-import", "rollout_fakes")
    assert first.returncode == 3, first.stdout[-2000:] + first.stderr[-2000:]  # an error episode
    stop = json.loads((out / "count" / "run_result.json").read_text())["stop"]
    assert stop["error_episodes"] == [2] and stop["episodes_used"] == 7, stop

    resumed = arena_run("--resume", str(out))
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "1 episode(s) of 1 run(s)" in resumed.stdout, resumed.stdout
    got = json.loads((out / "count" / "run_result.json").read_text())
    assert got["state"] == "completed" and got["stop"]["episodes_used"] == 7  # the decision kept
    assert got["stop"]["error_episodes"] == [] and got["stop"]["episodes_counted"] == 7
    assert "error episode(s) 2 were run again after the stop (the decision kept)" in got["stop"]["reason"]
    records, _ = read_records(out / "count" / "episodes.jsonl")
    assert max(r.episode_index for r in records) == 6  # nothing past the stop was run
    assert [r.outcome for r in records if r.episode_index == 2] == ["error", expected_outcome(2)]
    result = json.loads((out / "experiment_result.json").read_text())["runs"]["count"]
    assert result["n"] == 7 and result["errors"] == 0 and result["partial"] is False, result

    again = arena_run("--resume", str(out))
    assert again.returncode == 0 and "nothing to resume" in again.stdout, again.stdout + again.stderr
    assert json.loads((out / "count" / "run_result.json").read_text())["stop"] == got["stop"]
