"""Merge a finished (or running) experiment's records into ``experiment_result.json``.

Reads the output directory layout::

    manifest.json  experiment.yaml
    <run>/episodes.jsonl  <run>/run_result.json  <run>/status.json  <run>/server.log
    <run>/shards/<K>/episodes.jsonl  (+ run_result.json, status.json)

Records of one run (unsharded and all shards) are merged by ``episode_index``: a non-error
record wins over an error one, among equals the latest. Success rates are ``k/n`` over
non-error episodes with a 95 % Wilson interval; errors are reported next to them, never as
failures.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.results.stats import success_rate, wilson_interval
from arena.rollout.records import (
    FORMAT_VERSION,
    OUTCOMES,
    EpisodeRecord,
    count_outcomes,
    merge_records,
    read_json,
    read_records,
    utc_now,
    write_json_atomic,
)

RESULT_NAME = "experiment_result.json"
#: When several sources (shards) disagree, the run shows the first of these that any has.
_STATE_PRECEDENCE = ("failed", "cancelled", "running", "starting_server", "pending", "completed")


def _record_files(run_dir: Path) -> list[Path]:
    files = [run_dir / "episodes.jsonl"]
    shards = run_dir / "shards"
    if shards.is_dir():
        dirs = [d for d in shards.iterdir() if d.is_dir()]
        dirs.sort(key=lambda d: (0, int(d.name)) if d.name.isdigit() else (1, d.name))
        files.extend(d / "episodes.jsonl" for d in dirs)
    return [f for f in files if f.exists()]


def _state_dirs(run_dir: Path) -> list[Path]:
    dirs = [run_dir]
    shards = run_dir / "shards"
    if shards.is_dir():
        dirs.extend(sorted(d for d in shards.iterdir() if d.is_dir()))
    return dirs


def collect_run_records(run_dir: str | os.PathLike[str], issues: list[str] | None = None) -> list[EpisodeRecord]:
    """All records of one run, one per ``episode_index``, sorted by index.

    Merges ``<run>/episodes.jsonl`` and ``<run>/shards/*/episodes.jsonl``. Unreadable lines
    are skipped and described in ``issues`` when a list is given.
    """
    records: list[EpisodeRecord] = []
    for path in _record_files(Path(run_dir)):
        found, problems = read_records(path)
        records.extend(found)
        if issues is not None:
            issues.extend(problems)
    return merge_records(records)


def _run_state(run_dir: Path, has_records: bool) -> tuple[str, list[str], dict | None]:
    """``(state, errors, server)`` from the run's (and its shards') result and status files."""
    states: list[str] = []
    errors: list[str] = []
    server = None
    for directory in _state_dirs(run_dir):
        result = read_json(directory / "run_result.json")
        status = read_json(directory / "status.json")
        source = result if isinstance(result, dict) else status if isinstance(status, dict) else None
        if source is None:
            continue
        states.append(str(source.get("state", "pending")))
        if source.get("error"):
            errors.append(str(source["error"]))
        if server is None and isinstance(result, dict) and result.get("server"):
            server = result["server"]
    if not states:
        return ("running" if has_records else "pending"), errors, server
    for state in _STATE_PRECEDENCE:
        if state in states:
            return state, errors, server
    return states[0], errors, server


def summarize_run(output_dir: str | os.PathLike[str], name: str, manifest_entry: dict | None = None) -> dict[str, Any]:
    """One run's entry of ``experiment_result.json`` (see :func:`build_experiment_result`)."""
    run_dir = Path(output_dir) / name
    issues: list[str] = []
    records = collect_run_records(run_dir, issues)
    counts = count_outcomes(records)
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    state, errors, server = _run_state(run_dir, bool(records))
    entry = manifest_entry or {}
    first = records[0] if records else None
    total = entry.get("num_episodes", len(entry.get("work_items", [])) or None)
    recorded = len(records)
    server_log = run_dir / "server.log"
    return {
        "state": state,
        "error": "; ".join(dict.fromkeys(errors)) or None,
        "task": entry.get("task", first.task if first else None),
        "policy": entry.get("policy", first.policy if first else None),
        "counts": counts,
        "n": n,
        "k": k,
        "success_rate": success_rate(k, n),
        "ci95": [low, high],
        "ci_method": "wilson",
        "errors": counts["error"],
        "episodes_total": total,
        "episodes_recorded": recorded,
        "missing_episodes": max(0, total - recorded) if total is not None else None,
        "partial": counts["error"] > 0 or (total is not None and recorded < total),
        "server": server,
        "server_log": f"{name}/server.log" if server_log.exists() else None,
        "issues": issues,
    }


def _experiment_name(output_dir: Path, manifest: dict | None) -> str:
    if manifest and manifest.get("experiment"):
        return str(manifest["experiment"])
    snapshot = output_dir / "experiment.yaml"
    if snapshot.exists():
        try:
            import yaml

            data = yaml.safe_load(snapshot.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("name"):
                return str(data["name"])
        except (OSError, ValueError, yaml.YAMLError):
            pass
    return output_dir.name


def _run_names(output_dir: Path, manifest: dict | None) -> list[str]:
    names = list((manifest or {}).get("runs", {}))
    markers = ("episodes.jsonl", "status.json", "run_result.json", "shards")
    extra = sorted(
        d.name
        for d in output_dir.iterdir()
        if d.is_dir() and d.name not in names and any((d / m).exists() for m in markers)
    ) if output_dir.is_dir() else []
    return names + extra


def build_experiment_result(output_dir: str | os.PathLike[str], *, write: bool = True) -> dict[str, Any]:
    """Summarize every run of ``output_dir``; write ``experiment_result.json`` when ``write``.

    Layout: ``format_version``, ``experiment``, ``created_at``, ``runs: {NAME: {state,
    error, task, policy, counts {success, failure, timeout, error}, n, k, success_rate,
    ci95 [low, high], ci_method, errors, episodes_total, episodes_recorded,
    missing_episodes, partial, server, server_log, issues}}`` and ``overall`` (pooled
    counts, ``n``, ``k``, ``success_rate``, ``ci95``, ``macro_success_rate``: the mean of
    the per-run rates, ``states``: runs per state). A run listed in the manifest with no
    files yet is ``pending``; a failed run stays ``failed`` with its error.
    """
    output_dir = Path(output_dir)
    manifest = read_json(output_dir / "manifest.json")
    manifest = manifest if isinstance(manifest, dict) else None
    runs = {
        name: summarize_run(output_dir, name, (manifest or {}).get("runs", {}).get(name))
        for name in _run_names(output_dir, manifest)
    }
    counts = {outcome: sum(r["counts"][outcome] for r in runs.values()) for outcome in OUTCOMES}
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    rates = [r["success_rate"] for r in runs.values() if r["success_rate"] is not None]
    states: dict[str, int] = {}
    for r in runs.values():
        states[r["state"]] = states.get(r["state"], 0) + 1
    result = {
        "format_version": FORMAT_VERSION,
        "experiment": _experiment_name(output_dir, manifest),
        "created_at": utc_now(),
        "runs": runs,
        "overall": {
            "counts": counts,
            "n": n,
            "k": k,
            "success_rate": success_rate(k, n),
            "ci95": [low, high],
            "ci_method": "wilson",
            "aggregation": "pooled",
            "macro_success_rate": sum(rates) / len(rates) if rates else None,
            "errors": counts["error"],
            "states": states,
        },
    }
    if write:
        write_json_atomic(output_dir / RESULT_NAME, result)
    return result
