"""Progress while an experiment runs: plain lines for logs, rich bars on a terminal."""

from __future__ import annotations

import io
import time

from rich.console import Console

from arena.outputs.progress import ProgressWatcher, read_progress, summary_line
from arena.outputs.records import StatusWriter


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
    assert "runs 1/3 finished (1 running)" in line and "episodes 9/15" in line and "success 6/8" in line and "errors 1" in line


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
    assert "[arena]" in text and "episodes 1/2" in text and "runs 1/1 finished" in text


def test_on_a_terminal_progress_bars_show_runs_episodes_and_successes(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120)
    _status(tmp_path, "a", state="running", episodes_done=3, episodes_total=8, successes=2, errors=1)
    with ProgressWatcher(tmp_path, ["a", "b"], console, refresh_s=0.02):
        time.sleep(0.15)
    text = buffer.getvalue()
    assert "runs" in text and "episodes" in text and "3/8" in text and "success 2/2" in text


def test_cancelled_runs_are_counted_as_cancelled_not_done(tmp_path):
    _status(tmp_path, "a", state="completed", episodes_done=3, episodes_total=3, successes=3, errors=0)
    _status(tmp_path, "b", state="cancelled", episodes_done=1, episodes_total=3, successes=0, errors=0)
    _status(tmp_path, "c", state="cancelled", episodes_done=0, episodes_total=3, successes=0, errors=0)
    line = summary_line(read_progress(tmp_path, ["a", "b", "c"]))
    assert "runs 3/3 finished: 1 completed, 2 cancelled |" in line


def test_successes_of_different_policies_are_never_pooled(tmp_path):
    _status(tmp_path, "reach_expert", state="completed", episodes_done=4, episodes_total=4, successes=4, errors=0)
    _status(tmp_path, "pick_expert", state="running", episodes_done=2, episodes_total=4, successes=1, errors=0)
    _status(tmp_path, "reach_zero", state="completed", episodes_done=4, episodes_total=4, successes=0, errors=1)
    runs = ["reach_expert", "pick_expert", "reach_zero"]
    policies = {"reach_expert": "metaworld_expert_remote", "pick_expert": "metaworld_expert_remote", "reach_zero": "zero_action"}
    line = summary_line(read_progress(tmp_path, runs), policies)
    assert "success: metaworld_expert_remote 5/6, zero_action 0/3 |" in line
    assert "success 5/9" not in line
    one_policy = summary_line(read_progress(tmp_path, runs[:2]), policies)
    assert "| success 5/6 |" in one_policy


def test_on_a_terminal_the_episode_bar_keeps_policies_apart(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160)
    _status(tmp_path, "a", state="running", episodes_done=2, episodes_total=4, successes=2, errors=0)
    _status(tmp_path, "b", state="cancelled", episodes_done=2, episodes_total=4, successes=0, errors=0)
    with ProgressWatcher(tmp_path, ["a", "b"], console, policies={"a": "expert", "b": "zero_action"}, refresh_s=0.02):
        time.sleep(0.15)
    text = buffer.getvalue()
    assert "success: expert 2/2, zero_action 0/2" in text and "1 cancelled" in text


def test_plain_progress_ends_on_the_final_count_said_once(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    for run in ("a", "b", "c"):
        _status(tmp_path, run, state="completed", episodes_done=10, episodes_total=10, successes=5, errors=0)
    _status(tmp_path, "d", state="running", episodes_done=7, episodes_total=10, successes=2, errors=0)
    # The last run ends between two lines: the watcher's next look would come after the exit.
    with ProgressWatcher(tmp_path, ["a", "b", "c", "d"], console, interval_s=60, refresh_s=60):
        _status(tmp_path, "d", state="completed", episodes_done=10, episodes_total=10, successes=3, errors=0)
    lines = buffer.getvalue().splitlines()
    assert len(lines) == 1 and "runs 4/4 finished | episodes 40/40 | success 18/40" in lines[0], lines


def test_the_final_line_is_not_said_twice(tmp_path):
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=200)
    _status(tmp_path, "a", state="running", episodes_done=1, episodes_total=2, successes=1, errors=0)
    with ProgressWatcher(tmp_path, ["a"], console, interval_s=60, refresh_s=0.02):
        _status(tmp_path, "a", state="completed", episodes_done=2, episodes_total=2, successes=1, errors=0)
        deadline = time.monotonic() + 10
        while "runs 1/1" not in buffer.getvalue() and time.monotonic() < deadline:
            time.sleep(0.02)
    lines = buffer.getvalue().splitlines()
    assert sum("runs 1/1 finished" in line for line in lines) == 1, lines
