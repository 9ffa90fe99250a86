"""A run whose episodes all error shows why on the console and in the report, from one place
(``error_note`` of its ``experiment_result.json`` entry); errors never count as failures."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from arena.outputs.records import EpisodeRecord
from arena.results.run_summary import error_note


def test_a_run_whose_episodes_all_error_shows_the_reason_on_the_console_and_in_the_report(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "shared": {"rollout_limit": {"num_episodes": 3, "max_episode_steps": 5}},
        "runs": {
            "toy": {"environment": {"type": "arena.testing.envs:CrashingToyEnv", "cameras": False, "crash_seeds": [0, 1, 2],
                                    "crash_step": 1, "crash_mode": "raise"},
                    "policy": {"type": "random_action"}},
        },
    }))
    env = {**os.environ, "COLUMNS": "300"}  # the note column unwrapped
    done = subprocess.run([sys.executable, "-m", "arena", "run", str(exp), "--output-dir", str(tmp_path / "out")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 3, output  # error episodes: exit 3
    reason = "3 episodes errored: environment step failed: RuntimeError: toy simulator failed"
    run = json.loads((tmp_path / "out" / "experiment_result.json").read_text())["runs"]["toy"]
    assert run["error_note"] == reason and run["note"] == reason, run
    assert run["counts"]["error"] == 3 and run["counts"]["failure"] == 0 and run["n"] == 0 and run["success_rate"] is None
    assert reason in output, output  # the console summary's note column
    page = (tmp_path / "out" / "index.html").read_text()
    assert html.escape(reason) in page


def _record(index: int, outcome: str, error: str | None = None) -> EpisodeRecord:
    return EpisodeRecord(run="r", episode_index=index, seed=index, env_id=0, task="t", policy={"type": "p"}, outcome=outcome,
                         error=error, steps=0, duration_s=0.0, return_=0.0, finished_at="2026-01-01T00:00:00+00:00")


def test_the_error_note_gives_the_most_common_first_line_and_counts_the_rest() -> None:
    assert error_note([_record(0, "success"), _record(1, "failure")]) is None
    records = [_record(0, "error", "server died\nTraceback ..."), _record(1, "error", "server died"),
               _record(2, "error", "protocol violation"), _record(3, "failure"), _record(4, "error")]
    assert error_note(records) == "2 of 4 error episodes: server died; 2 more with 2 other reasons"
    assert error_note([_record(0, "error", "x" * 1000)]) == "1 episode errored: " + "x" * 300
    # the same cause in env 0 and env 1, on other ports and sequence numbers, is one reason
    same = [_record(0, "error", "PolicyError: env 0: ws://127.0.0.1:49119: failed on observation seq 7"),
            _record(1, "error", "PolicyError: env 1: ws://127.0.0.1:49120: failed on observation seq 12")]
    assert error_note(same) == "2 episodes errored: PolicyError: env 0: ws://127.0.0.1:49119: failed on observation seq 7"
