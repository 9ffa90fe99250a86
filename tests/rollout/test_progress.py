"""Progress while an experiment runs: plain lines for logs, rich bars on a terminal."""

from __future__ import annotations

import io
import time

from rich.console import Console

from arena.rollout.progress import ProgressWatcher, read_progress, summary_line
from arena.rollout.records import StatusWriter


def _status(out, run, shard_dir=None, **fields):
    path = out / run / "status.json" if shard_dir is None else out / run / "shards" / str(shard_dir) / "status.json"
    StatusWriter(path).write(**fields)


def test_progress_sums_shards_and_counts_pending_runs(tmp_path):
    _status(tmp_path, "a", state="completed", episodes_done=4, episodes_total=4, successes=3, errors=0)
    _status(tmp_path, "b", 0, shard=[0, 2], state="running", episodes_done=2, episodes_total=3, successes=1, errors=1)
    _status(tmp_path, "b", 1, shard=[1, 2], state="completed", episodes_done=3, episodes_total=3, successes=2, errors=0)
    progress = read_progress(tmp_path, ["a", "b", "c"], totals={"a": 4, "b": 6, "c": 5})
    assert progress["a"]["state"] == "completed"
    assert progress["b"]["state"] == "running" and progress["b"]["episodes_done"] == 5 and progress["b"]["successes"] == 3
    assert progress["c"]["state"] == "pending" and progress["c"]["episodes_total"] == 5
    line = summary_line(progress)
    assert "runs 1/3 done (1 running)" in line and "episodes 9/15" in line and "success 6/8" in line and "errors 1" in line


def test_without_a_terminal_plain_lines_are_logged_periodically(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    _status(tmp_path, "a", state="running", episodes_done=1, episodes_total=2, successes=1, errors=0)
    with ProgressWatcher(tmp_path, ["a"], console, interval_s=0.05, refresh_s=0.02):
        time.sleep(0.2)
        _status(tmp_path, "a", state="completed", episodes_done=2, episodes_total=2, successes=1, errors=0)
        time.sleep(0.2)
    text = buffer.getvalue()
    assert "\x1b[" not in text  # no terminal control codes in logs
    assert "[arena]" in text and "episodes 1/2" in text and "runs 1/1 done" in text


def test_on_a_terminal_progress_bars_show_runs_episodes_and_successes(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    _status(tmp_path, "a", state="running", episodes_done=3, episodes_total=8, successes=2, errors=1)
    with ProgressWatcher(tmp_path, ["a", "b"], console, refresh_s=0.02):
        time.sleep(0.15)
    text = buffer.getvalue()
    assert "runs" in text and "episodes" in text and "3/8" in text and "success 2/2" in text
