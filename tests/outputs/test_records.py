from __future__ import annotations

import json
import os
import threading

import pytest

from arena.policies.base import latency_stats
from arena.outputs.records import (
    RUN_STATES,
    EpisodeRecord,
    RecordWriter,
    StatusWriter,

    merge_records,
    read_records,
)


def _record(i: int, outcome: str = "success", **kw) -> EpisodeRecord:
    return EpisodeRecord(
        run="r", episode_index=i, seed=10 + i, env_id=0, task="t", policy={"type": "p", "variant": None},
        outcome=outcome, steps=3, duration_s=0.5, return_=1.5, **kw,
    )


def test_records_are_written_one_json_line_each_and_read_back(tmp_path):
    path = tmp_path / "run" / "episodes.jsonl"
    with RecordWriter(path) as writer:
        writer.write(_record(0))
        writer.write(_record(1, "error", error="server unreachable"))
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    for key in ("format_version", "run", "episode_index", "seed", "env_id", "task", "policy", "outcome",
                "error", "steps", "duration_s", "return", "latency", "server_timing", "video", "finished_at"):
        assert key in first
    assert first["format_version"] == 1 and first["return"] == 1.5
    records, issues = read_records(path)
    assert issues == []
    assert [r.outcome for r in records] == ["success", "error"]
    assert records[1].error == "server unreachable"


def test_torn_last_line_is_reported_not_fatal_and_appending_continues(tmp_path):
    path = tmp_path / "episodes.jsonl"
    with RecordWriter(path) as writer:
        writer.write(_record(0))
    with open(path, "ab") as handle:
        handle.write(b'{"run": "r", "episode_ind')  # the process died mid-write
    records, issues = read_records(path)
    assert len(records) == 1 and len(issues) == 1 and "torn last line" in issues[0]
    with RecordWriter(path) as writer:  # a resumed run appends on a fresh line
        writer.write(_record(1))
    records, issues = read_records(path)
    assert [r.episode_index for r in records] == [0, 1]
    assert len(issues) == 1 and ":2:" in issues[0]


def test_missing_records_file_reads_as_empty(tmp_path):
    assert read_records(tmp_path / "nope.jsonl") == ([], [])


def test_unknown_fields_from_a_newer_writer_are_kept():
    data = json.loads(_record(0).to_json())
    data["new_field"] = 7
    assert json.loads(EpisodeRecord.model_validate(data).to_json())["new_field"] == 7


def test_merge_prefers_non_error_then_latest():
    a = _record(0, "error", error="x", finished_at="2026-01-01T00:00:00+00:00")
    b = _record(0, "failure", finished_at="2026-01-01T00:00:01+00:00")
    c = _record(0, "error", error="y", finished_at="2026-01-01T00:00:02+00:00")
    d = _record(1, "timeout", finished_at="2026-01-01T00:00:00+00:00")
    e = _record(1, "success", finished_at="2026-01-01T00:00:05+00:00")
    merged = merge_records([e, a, b, c, d])
    assert [(r.episode_index, r.outcome) for r in merged] == [(0, "failure"), (1, "success")]


def test_status_json_is_rewritten_atomically(tmp_path):
    path = tmp_path / "status.json"
    status = StatusWriter(path, run="r")
    status.progress(state="running", episodes_total=100)
    seen_bad = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                seen_bad.append(1)
                continue
            assert data["state"] == "running"

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(200):
        status.progress(episodes_done=i)
    stop.set()
    thread.join()
    assert not seen_bad
    data = json.loads(path.read_text())
    assert set(data) >= {"state", "episodes_done", "episodes_total", "successes", "errors",
                         "last_progress_at", "restarts", "pid"}
    assert data["episodes_done"] == 199 and data["pid"] == os.getpid()
    assert not [p for p in tmp_path.iterdir() if p.name != "status.json"]  # no temp files left


def test_status_refuses_unknown_state(tmp_path):
    assert RUN_STATES == ("pending", "starting_server", "running", "completed", "failed", "cancelled")
    with pytest.raises(ValueError, match="unknown run state"):
        StatusWriter(tmp_path / "s.json").update(state="done")


def test_latency_stats_summarize_request_times():
    stats = latency_stats([10.0, 20.0, 30.0, 40.0, 1000.0])
    assert stats == {"requests": 5, "mean_ms": 220.0, "p50_ms": 30.0, "p95_ms": 1000.0, "max_ms": 1000.0}
    assert latency_stats([]) is None


def test_run_result_of_a_runner_that_died_counts_what_it_recorded(tmp_path):
    from arena.outputs.records import write_run_result

    with RecordWriter(tmp_path / "episodes.jsonl") as writer:
        for i, outcome in enumerate(["success", "failure", "error", "success"]):
            writer.write(_record(i, outcome))
    result = write_run_result(tmp_path, run="r", state="failed", error="runner exited with code -9")
    assert json.loads((tmp_path / "run_result.json").read_text()) == result
    assert result["counts"] == {"success": 2, "failure": 1, "timeout": 0, "error": 1}
    assert result["success_rate"] == pytest.approx(2 / 3) and result["episodes"] == 4
    empty = write_run_result(tmp_path / "none", run="r", state="failed", error="server never became ready")
    assert empty["success_rate"] is None and empty["ci95"] == [0.0, 1.0]
    with pytest.raises(ValueError):
        write_run_result(tmp_path, run="r", state="exploded")


def test_run_result_sums_reconnects_and_warns_about_episodes_whose_server_session_was_reset(tmp_path):
    from arena.outputs.records import write_run_result

    def reconnected(count: int, reset: bool) -> dict:
        return {"reconnects": {"count": count, "at_request": [0] * count, "at_step": [0] * count, "session_reset": reset}}

    records = [_record(0), _record(1, policy_extras=reconnected(1, False)), _record(2, policy_extras=reconnected(2, True))]
    result = write_run_result(tmp_path, run="r", state="completed", records=records)
    assert result["reconnects"] == {"count": 3, "episodes": 2, "session_reset_episodes": [2]}
    assert any("mid-episode" in w and "episodes 2" in w for w in result["warnings"])
    assert "reconnects" not in write_run_result(tmp_path / "quiet", run="r", state="completed", records=records[:1])
