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


def test_error_notes_keep_exit_codes_and_signals_apart_and_merge_env_indices_ports_and_sequences(tmp_path: Path) -> None:
    """Three of four episodes died of the OOM killer (code 137), one of an exception (code 1):
    the report says 137 for three, not "4 episodes errored: ...code 1" (numbers were ignored
    when grouping, the exit code with them)."""
    import markupsafe

    from arena.outputs.records import RecordWriter

    reasons = ["env 2: policy server 'pi0' exited (code 137) and was restarted 2 time(s): Killed",
               "env 0: policy server 'pi0' exited (code 1) and was restarted 2 time(s): Killed",
               "env 1: policy server 'pi0' exited (code 137) and was restarted 2 time(s): Killed",
               "env 3: policy server 'pi0' exited (code 137) and was restarted 2 time(s): Killed"]
    out = tmp_path / "out"
    (out / "r").mkdir(parents=True)
    (out / "manifest.json").write_text(json.dumps({"runs": {"r": {"task": "t", "num_episodes": 5}}}))
    with RecordWriter(out / "r" / "episodes.jsonl") as writer:
        for i, reason in enumerate(reasons):
            writer.write(_record(i, "error", reason))
        writer.write(_record(4, "success"))
    done = subprocess.run([sys.executable, "-m", "arena", "report", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    note = json.loads((out / "experiment_result.json").read_text())["runs"]["r"]["error_note"]
    assert note == ("3 of 4 error episodes: env 2: policy server 'pi0' exited (code 137) and was restarted 2 time(s): "
                    "Killed; 1 more with 1 other reason"), note
    assert str(markupsafe.escape(note)) in (out / "index.html").read_text()
    # signals and exit statuses are causes too; env index, port and sequence number are not
    killed = [_record(0, "error", "env 0: worker was killed by signal 9 on port 41000"),
              _record(1, "error", "env 1: worker was killed by signal 15 on port 41001"),
              _record(2, "error", "env 2: worker exit status 3, seq 12"), _record(3, "error", "env 3: worker exit status 3, seq 40")]
    assert error_note(killed) == "2 of 4 error episodes: env 2: worker exit status 3, seq 12; 2 more with 2 other reasons"
