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
