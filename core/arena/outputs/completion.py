"""A run's final state follows its records.

A run whose every planned work item has a record (any outcome: an ``error`` episode is
recorded too) — or whose ``stop_when`` rule has decided — is ``completed``, whatever stopped
the process that ran it once the last record was written: a Ctrl-C, ``arena cancel`` or a
preemption arriving while the environment was closing, a runner killed before it wrote its
final state. :func:`complete_recorded_run` rewrites such a run's ``run_result.json`` and
``status.json`` (each work directory's: the run's, or its shards') from the records, so every
reader (``arena status``, ``experiment_result.json``, ``arena compare``, the result sinks)
sees one state. ``arena run --resume`` calls it for runs with nothing left to run; the local
backend when a runner ends without a final state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.outputs.layout import EPISODES_FILE, MANIFEST_FILE, RUN_RESULT_FILE, STATUS_FILE, run_dir, work_dirs
from arena.outputs.records import (
    StatusWriter,
    count_outcomes,
    merge_records,
    read_json,
    read_records,
    write_json_atomic,
    write_run_result,
)


def _manifest_entry(output_dir: Path, run: str) -> dict[str, Any] | None:
    manifest = read_json(output_dir / MANIFEST_FILE)
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    entry = runs.get(run) if isinstance(runs, dict) else None
    return entry if isinstance(entry, dict) else None


def _stop_of(directory: Path) -> dict[str, Any] | None:
    result = read_json(directory / RUN_RESULT_FILE)
    stop = result.get("stop") if isinstance(result, dict) else None
    return stop if isinstance(stop, dict) and isinstance(stop.get("episodes_used"), int) else None


def all_recorded(output_dir: str | os.PathLike[str], run: str) -> bool:
    """Whether every work item of ``run`` in ``manifest.json`` has a record (in the run's
    directory or its shards'), or a ``stop_when`` rule stopped it; ``False`` without a manifest
    entry."""
    output_dir = Path(output_dir)
    entry = _manifest_entry(output_dir, run)
    if entry is None:
        return False
    directory = run_dir(output_dir, run)
    if any(_stop_of(d) is not None for d in work_dirs(directory)):
        return True
    planned = {int(item["episode_index"]) for item in entry.get("work_items", [])}
    recorded: set[int] = set()
    for d in work_dirs(directory):
        records, _ = read_records(d / EPISODES_FILE)
        recorded.update(r.episode_index for r in records)
    return bool(planned) and planned <= recorded


def complete_recorded_run(output_dir: str | os.PathLike[str], run: str) -> dict[str, Any] | None:
    """Mark ``run`` ``completed`` when :func:`all_recorded` holds and a work directory of it
    says otherwise (``cancelled``, ``failed``, a live state, or no result): its
    ``run_result.json`` is rewritten from its records (the fields it had are kept: server,
    machine, model, warnings, ``stop``) and ``status.json`` follows. Returns the run's (first
    work directory's) new ``run_result.json`` content, or ``None`` when nothing changed.

    Raises:
        OSError: a file cannot be written.
    """
    output_dir = Path(output_dir)
    if not all_recorded(output_dir, run):
        return None
    entry = _manifest_entry(output_dir, run) or {}
    changed: dict[str, Any] | None = None
    for directory in work_dirs(run_dir(output_dir, run)):
        old = read_json(directory / RUN_RESULT_FILE)
        old = old if isinstance(old, dict) else {}
        status = read_json(directory / STATUS_FILE)
        status = status if isinstance(status, dict) else {}
        if old.get("state") == "completed" and status.get("state", "completed") == "completed":
            continue
        records, _ = read_records(directory / EPISODES_FILE)
        if not records and not old:  # e.g. the directory above a sharded run's shards
            if status:
                StatusWriter(directory / STATUS_FILE, **status).update(state="completed", error=None)
            continue
        stop = old.get("stop") if isinstance(old.get("stop"), dict) else None
        merged = merge_records(records)
        if stop is not None:
            merged = [r for r in merged if r.episode_index < stop["episodes_used"]]
        shard = old.get("shard")
        result = write_run_result(
            directory, run=run, state="completed", error=None, server=old.get("server"), records=merged,
            episodes_total=old.get("episodes_total", entry.get("num_episodes")), started_at=old.get("started_at"),
            shard=shard if isinstance(shard, list) else None, machine=old.get("machine"),
            warnings=[str(w) for w in old.get("warnings") or []], model=old.get("model"),
            metric_bounds=entry.get("metric_bounds"),
        )
        if stop is not None:
            result["stop"] = stop
            write_json_atomic(directory / RUN_RESULT_FILE, result)
        counts = count_outcomes(merged)
        tallies = {"episodes_done": len(merged), "successes": counts["success"], "errors": counts["error"]}
        if stop is not None:
            tallies["episodes_total"] = stop["episodes_used"]
        StatusWriter(directory / STATUS_FILE, **{**status, "run": run}).update(
            state="completed", error=None, warnings=result["warnings"], **tallies
        )
        changed = changed or result
    return changed
