"""One run's records read back and summarized: its entry of ``experiment_result.json``.

Reads a run's part of the output directory layout::

    <run>/episodes.jsonl  <run>/run_result.json  <run>/status.json  <run>/server.log
    <run>/shards/<K>/episodes.jsonl  (+ run_result.json, status.json)

Records of one run (unsharded and all shards) are merged by ``episode_index``: a non-error
record wins over an error one, among equals the latest. Success rates are ``k/n`` over
non-error episodes with a 95 % Wilson interval (:mod:`arena.outputs.run_stats`); errors are
reported next to them, never as failures.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from arena.outputs.layout import EPISODES_FILE, RUN_RESULT_FILE, SERVER_LOG, STATUS_FILE, work_dirs
from arena.outputs.metrics import summarize_metrics
from arena.outputs.records import (
    EpisodeRecord,
    NON_FINITE_WARNING_START,
    count_outcomes,
    merge_records,
    non_finite_episodes,
    non_finite_warning,
    partial_note,
    read_json,
    read_records,
)
from arena.outputs.run_stats import success_rate, wilson_interval

#: When several sources (shards) disagree, the run shows the first of these that any has.
_STATE_PRECEDENCE = ("failed", "cancelled", "running", "starting_server", "pending", "completed")


def collect_run_records(run_dir: str | os.PathLike[str], issues: list[str] | None = None) -> list[EpisodeRecord]:
    """All records of one run, one per ``episode_index``, sorted by index.

    Merges ``<run>/episodes.jsonl`` and ``<run>/shards/*/episodes.jsonl``. Unreadable lines
    are skipped and described in ``issues`` when a list is given.
    """
    records: list[EpisodeRecord] = []
    for path in (d / EPISODES_FILE for d in work_dirs(run_dir)):
        found, problems = read_records(path)
        records.extend(found)
        if issues is not None:
            issues.extend(problems)
    return merge_records(records)


def read_stop(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The ``stop`` entry of a run stopped early by ``rollout_limit.stop_when``
    (:meth:`arena.outputs.stopping.StopDecision.to_dict`), or ``None``."""
    result = read_json(Path(run_dir) / RUN_RESULT_FILE)
    stop = result.get("stop") if isinstance(result, dict) else None
    return stop if isinstance(stop, dict) and isinstance(stop.get("episodes_used"), int) else None


def counted_run_records(run_dir: str | os.PathLike[str], issues: list[str] | None = None) -> list[EpisodeRecord]:
    """:func:`collect_run_records` less the episodes past an early stop (kept on disk, never
    counted: see :mod:`arena.outputs.stopping`)."""
    records = collect_run_records(run_dir, issues)
    stop = read_stop(run_dir)
    return records if stop is None else [r for r in records if r.episode_index < stop["episodes_used"]]


def _run_state(run_dir: Path, has_records: bool) -> tuple[str, list[str], dict | None]:
    """``(state, errors, server)`` from the run's (and its shards') result and status files."""
    states: list[str] = []
    errors: list[str] = []
    server = None
    for directory in work_dirs(run_dir):
        result = read_json(directory / RUN_RESULT_FILE)
        status = read_json(directory / STATUS_FILE)
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
    """One run's entry of ``experiment_result.json`` (see :func:`arena.results.aggregate.build_experiment_result`)."""
    issues: list[str] = []
    records = counted_run_records(Path(output_dir) / name, issues)
    return summarize_records(Path(output_dir), name, manifest_entry, records, issues)


def summarize_records(
    output_dir: Path, name: str, manifest_entry: dict | None, records: list[EpisodeRecord], issues: list[str]
) -> dict[str, Any]:
    """:func:`summarize_run` of records already read (:func:`counted_run_records`); the keys are
    listed under ``runs`` in :func:`arena.results.aggregate.build_experiment_result`."""
    run_dir = output_dir / name
    counts = count_outcomes(records)
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    state, errors, server = _run_state(run_dir, bool(records))
    entry = manifest_entry or {}
    first = records[0] if records else None
    total = entry.get("num_episodes", len(entry.get("work_items", [])) or None)
    stop = read_stop(run_dir)
    if stop is not None:  # a run stopped by its rule is complete at the stopping index
        total = stop["episodes_used"]
        stop = {**stop, "wilson_ci95": [low, high]}
    recorded = len(records)
    note = partial_note(state, recorded, total, counts["error"])
    errored = error_note(records)
    shown = [partial_note(state, recorded, total, 0) if errored else note, errored]  # the count once, with its reason
    server_log = run_dir / SERVER_LOG
    status = read_json(run_dir / STATUS_FILE)
    restarts = status.get("restarts", 0) if isinstance(status, dict) else 0
    machine = None
    model = None
    warnings: list[str] = []
    for directory in work_dirs(run_dir):
        result = read_json(directory / RUN_RESULT_FILE)
        source = result if isinstance(result, dict) else read_json(directory / STATUS_FILE)
        if isinstance(source, dict) and isinstance(source.get("warnings"), list):
            warnings += [str(w) for w in source["warnings"] if str(w) not in warnings]
        if machine is None and isinstance(result, dict) and result.get("machine"):
            machine = result["machine"]
        if model is None and isinstance(result, dict) and isinstance(result.get("model"), dict):
            model = result["model"]
    flagged = non_finite_warning(records)  # from the records, whatever run_result.json said
    warnings = [w for w in warnings if NON_FINITE_WARNING_START not in w] + ([flagged] if flagged else [])
    seeds = None
    if "seed" in entry:
        count = int(entry.get("num_episodes") or 0)
        seeds = {"base": entry["seed"], "first": entry["seed"], "last": entry["seed"] + max(0, count - 1)}
    elif records:
        seeds = {"base": None, "first": min(r.seed for r in records), "last": max(r.seed for r in records)}
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
        "partial": note is not None,
        "partial_note": note,
        "error_note": errored,
        "note": "; ".join(n for n in shown if n) or None,
        "server": server,
        "server_log": f"{name}/{SERVER_LOG}" if server_log.exists() else None,
        "issues": issues,
        "latency": latency_summary(records),
        "metrics": (metrics := summarize_metrics(records, entry.get("metric_bounds"))),
        "as_reported": as_reported(entry.get("reported_as"), k, n, (low, high), metrics, records, entry.get("metric_bounds")),
        "non_finite": non_finite_episodes(records) or None,
        "seeds": seeds,
        "num_envs": entry.get("num_envs"),
        "control_hz": entry.get("control_hz"),
        "videos": sum(1 for r in records if r.video),
        "restarts": restarts if isinstance(restarts, int) else 0,
        "machine": machine,
        "warnings": warnings,
        "model": model,
        "stop": stop,
    }


def as_reported(
    declared: Any, k: int, n: int, ci95: tuple[float | None, float | None], metrics: dict[str, Any] | None,
    records: list[EpisodeRecord], bounds: dict[str, Any] | None,
) -> dict[str, Any] | None:
    """A run's figures under the names a reference tool reports them (the environment's
    ``reported_as``, from the manifest: ``{"by": TOOL, "names": {NAME: FIGURE}}``), each
    ``{"figure", "mean", "ci_low", "ci_high", "episodes"}`` with arena's interval for it (Wilson
    for a success rate, the episode metric's or the return's own); ``None`` without a
    declaration. A figure with no value (no counted episode, a metric the run lacks) is left out.

    Returns:
        ``{"by": TOOL, "figures": {NAME: {...}}}``, e.g. lerobot-eval's ``pc_success`` as the
        success rate in percent (``mean`` 85.0, ``ci_low`` 64.0, ...).
    """
    from arena.outputs.metrics import summarize_returns

    if not isinstance(declared, dict) or not isinstance(declared.get("names"), dict):
        return None
    figures: dict[str, Any] = {}
    for name, figure in declared["names"].items():
        value: dict[str, Any] | None = None
        if figure in ("success_rate", "success_rate_pct") and n:
            scale = 100.0 if figure == "success_rate_pct" else 1.0
            value = {"mean": scale * k / n, "ci_low": None if ci95[0] is None else scale * ci95[0],
                     "ci_high": None if ci95[1] is None else scale * ci95[1], "episodes": n}
        elif figure == "return":
            value = summarize_returns(records, bounds)
        elif figure.startswith("metrics."):
            value = (metrics or {}).get(figure.removeprefix("metrics."))
        if value:
            figures[name] = {"figure": figure, **{key: value.get(key) for key in ("mean", "ci_low", "ci_high", "episodes")}}
    return {"by": declared.get("by"), "figures": figures} if figures else None


#: The most of an error reason :func:`error_note` keeps (its first line).
_REASON_CHARS = 300
#: Numbers in an error's first line: an exit code or a signal (``exited with code 137``,
#: ``signal 9``, ``exit status -9``) is part of its cause and kept; any other number (env
#: index, port, sequence number) is not.
_NUMBERS = re.compile(r"((?:code|signal|status|returncode|exitcode)\W{0,2}-?\d+)|\d+", re.IGNORECASE)


def cause_of(first_line: str) -> str:
    """An error's first line with the numbers that do not make its cause masked (``#``):
    ``"env 3: worker exited with code 137"`` -> ``"env #: worker exited with code 137"``.
    Two reasons with the same cause give the same string."""
    return _NUMBERS.sub(lambda m: m.group(1) or "#", first_line)


def error_note(records: list[EpisodeRecord]) -> str | None:
    """Why a run's error episodes errored, in one line: ``"12 episodes errored: worker could
    not build environment: ..."`` (the most common reason, by its first line cut at 300
    characters, compared by :func:`cause_of`: numbers other than exit codes and signals left
    out; shown as its first episode has it), ``"; 3 more with 2 other reasons"`` when they differ; ``None`` without error
    episodes. The reason is the record's ``error``; errors are the infrastructure's, never
    the policy's failures. What the console summary of ``arena run``, the report and the
    watch show as the run's note (``error_note`` of its ``experiment_result.json`` entry)."""
    firsts = [((r.error or "").strip().splitlines() or ["no reason recorded"])[0][:_REASON_CHARS]
              for r in records if r.outcome == "error"]
    if not firsts:
        return None
    # one cause, whatever env index, port or sequence number its message names; exit codes
    # and signals differ by cause (137: killed, out of memory; 1: an exception) and stay apart
    reasons = Counter(cause_of(first) for first in firsts)
    total = len(firsts)
    (key, count), others = reasons.most_common(1)[0], len(reasons) - 1
    reason = next(first for first in firsts if cause_of(first) == key)
    head = f"{total} episode{'s' if total != 1 else ''} errored: {reason}" if not others else f"{count} of {total} error episodes: {reason}"
    return head + (f"; {total - count} more with {others} other reason{'s' if others != 1 else ''}" if others else "")


def latency_summary(records: list[EpisodeRecord]) -> dict[str, Any] | None:
    """Request latency of a run from its records' ``latency`` and ``server_timing``.

    Returns ``None`` when no record has latency (a local policy), else ``requests`` (total),
    ``mean_ms`` (request-weighted mean), ``p50_ms`` (median of the episodes' medians),
    ``p95_ms_worst_episode`` (the largest episode p95), ``max_ms``, and when the server
    reported its timing ``server_infer_ms_mean`` (weighted by the episode's requests),
    ``server_infer_ms_max`` and ``overhead_ms_mean`` (latency the server did not spend
    inferring: transport, encoding, queueing).
    """
    rows = [(r.latency, r.server_timing) for r in records if isinstance(r.latency, dict) and r.latency.get("requests")]
    if not rows:
        return None
    requests = sum(int(lat["requests"]) for lat, _ in rows)
    mean = sum(float(lat.get("mean_ms") or 0.0) * int(lat["requests"]) for lat, _ in rows) / requests
    medians = sorted(float(lat.get("p50_ms") or 0.0) for lat, _ in rows)
    middle = len(medians) // 2
    p50 = medians[middle] if len(medians) % 2 else (medians[middle - 1] + medians[middle]) / 2
    summary: dict[str, Any] = {
        "requests": requests,
        "episodes": len(rows),
        "mean_ms": mean,
        "p50_ms": p50,
        "p95_ms_worst_episode": max(float(lat.get("p95_ms") or 0.0) for lat, _ in rows),
        "max_ms": max(float(lat.get("max_ms") or 0.0) for lat, _ in rows),
    }
    timed = [(lat, st) for lat, st in rows if isinstance(st, dict) and st.get("infer_ms_mean") is not None]
    if timed:
        weight = sum(int(lat["requests"]) for lat, _ in timed)
        server_mean = sum(float(st["infer_ms_mean"]) * int(lat["requests"]) for lat, st in timed) / weight
        summary["server_infer_ms_mean"] = server_mean
        summary["server_infer_ms_max"] = max(float(st.get("infer_ms_max") or 0.0) for _, st in timed)
        timed_mean = sum(float(lat.get("mean_ms") or 0.0) * int(lat["requests"]) for lat, _ in timed) / weight
        summary["overhead_ms_mean"] = timed_mean - server_mean
    return summary

