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

import json
import os
from pathlib import Path
from typing import Any

from arena.outputs.stats import success_rate, wilson_interval
from arena.results.stats import newcombe_difference
from arena.outputs.layout import (
    EPISODES_FILE,
    EXPERIMENT_RESULT_FILE,
    MANIFEST_FILE,
    RUN_RESULT_FILE,
    SERVER_LOG,
    STATUS_FILE,
    read_snapshot,
    run_names,
    work_dirs,
)
from arena.outputs.records import (
    FORMAT_VERSION,
    OUTCOMES,
    EpisodeRecord,
    count_outcomes,
    merge_records,
    partial_note,
    read_json,
    read_records,
    utc_now,
    write_json_atomic,
)

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
    """One run's entry of ``experiment_result.json`` (see :func:`build_experiment_result`)."""
    issues: list[str] = []
    records = collect_run_records(Path(output_dir) / name, issues)
    return _summarize(Path(output_dir), name, manifest_entry, records, issues)


def _summarize(
    output_dir: Path, name: str, manifest_entry: dict | None, records: list[EpisodeRecord], issues: list[str]
) -> dict[str, Any]:
    run_dir = output_dir / name
    counts = count_outcomes(records)
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    state, errors, server = _run_state(run_dir, bool(records))
    entry = manifest_entry or {}
    first = records[0] if records else None
    total = entry.get("num_episodes", len(entry.get("work_items", [])) or None)
    recorded = len(records)
    note = partial_note(state, recorded, total, counts["error"])
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
        "server": server,
        "server_log": f"{name}/{SERVER_LOG}" if server_log.exists() else None,
        "issues": issues,
        "latency": latency_summary(records),
        "seeds": seeds,
        "num_envs": entry.get("num_envs"),
        "videos": sum(1 for r in records if r.video),
        "restarts": restarts if isinstance(restarts, int) else 0,
        "machine": machine,
        "warnings": warnings,
        "model": model,
    }


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


def policy_label(policy: dict | None) -> str:
    """``type`` or ``type (variant)`` of a record's / manifest's policy."""
    if not policy:
        return "?"
    label = str(policy.get("type") or "?")
    return f"{label} ({policy['variant']})" if policy.get("variant") else label


#: What identifies the model that answered a run (``run_result.json``'s ``model``).
MODEL_FIELDS = ("checkpoint", "revision", "image", "image_digest", "server_metadata")


def models_differ(run_a: dict[str, Any], run_b: dict[str, Any]) -> list[str] | None:
    """What differs between the models that served two runs of the same policy type.

    ``None`` when the policy types differ (a different model is expected) or either side
    recorded no model (a local policy, or a run that never reached its server: unknown is
    not different); else the list of differing :data:`MODEL_FIELDS` (empty: the same model
    as far as recorded).
    """
    pa, pb = run_a.get("policy") or {}, run_b.get("policy") or {}
    if not pa or pa.get("type") != pb.get("type"):
        return None
    ma, mb = run_a.get("model") or {}, run_b.get("model") or {}
    if not ma or not mb:
        return None
    return [f for f in MODEL_FIELDS if ma.get(f) != mb.get(f) and (ma.get(f) is not None or mb.get(f) is not None)]


#: The fields that name a model in a label (server metadata may hold per-connection values).
_NAMING_FIELDS = ("checkpoint", "revision", "image", "image_digest")


def _model_identity(model: Any) -> tuple | None:
    if not isinstance(model, dict):
        return None
    return tuple(json.dumps(model.get(f), sort_keys=True, default=str) for f in _NAMING_FIELDS)


def policy_labels(runs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each run's policy as the report names it: :func:`policy_label`, plus the model that
    answered where runs of that label were served by different models.

    ``pi0_remote · checkpoint gs://…/pi05_droid`` and ``pi0_remote · checkpoint
    gs://…/pi05_libero`` are two policies (tabled, compared and pooled apart). Models differ
    by checkpoint, revision, image or image digest; the label shows the first of these that
    tells them apart. A run without a recorded model keeps the bare label.
    """
    labels = {name: policy_label(run.get("policy")) for name, run in runs.items()}
    groups: dict[str, list[str]] = {}
    for name, label in labels.items():
        if _model_identity(runs[name].get("model")) is not None:
            groups.setdefault(label, []).append(name)
    for label, names in groups.items():
        identities = {_model_identity(runs[n]["model"]) for n in names}
        if len(identities) < 2:
            continue
        field = next(f for i, f in enumerate(_NAMING_FIELDS) if len({ident[i] for ident in identities}) > 1)
        for name in names:
            value = runs[name]["model"].get(field)
            labels[name] = f"{label} · {field.replace('_', ' ')} {value if value is not None else 'none'}"
    return labels


def _label(run: dict[str, Any]) -> str:
    return run.get("policy_label") or policy_label(run.get("policy"))


def _paired(records_a: list[EpisodeRecord], records_b: list[EpisodeRecord]) -> dict[str, int] | None:
    """Outcome pairs on seeds both runs played (non-error on both sides)."""
    a = {r.seed: r.outcome == "success" for r in records_a if r.outcome != "error"}
    b = {r.seed: r.outcome == "success" for r in records_b if r.outcome != "error"}
    common = sorted(set(a) & set(b))
    if not common:
        return None
    return {
        "seeds": len(common),
        "both": sum(a[s] and b[s] for s in common),
        "neither": sum(not a[s] and not b[s] for s in common),
        "only_a": sum(a[s] and not b[s] for s in common),
        "only_b": sum(b[s] and not a[s] for s in common),
    }


def compare_runs(name_a: str, run_a: dict, name_b: str, run_b: dict, records_a=None, records_b=None) -> dict[str, Any]:
    """``a`` vs ``b``: rates, the difference ``a - b`` and its 95 % Newcombe interval.

    ``difference``/``ci95`` are ``None`` when either side has no non-error episode.
    ``significant``: the interval excludes 0. ``paired`` counts outcome pairs on common seeds.
    """
    diff = low = high = None
    if run_a["n"] and run_b["n"]:
        diff, low, high = newcombe_difference(run_a["k"], run_a["n"], run_b["k"], run_b["n"])
    return {
        "a": name_a,
        "b": name_b,
        "task": run_a.get("task"),
        "policy_a": _label(run_a),
        "policy_b": _label(run_b),
        "k_a": run_a["k"], "n_a": run_a["n"], "rate_a": run_a["success_rate"],
        "k_b": run_b["k"], "n_b": run_b["n"], "rate_b": run_b["success_rate"],
        "difference": diff,
        "ci95": [low, high] if diff is not None else None,
        "ci_method": "newcombe-hybrid-score",
        "significant": diff is not None and (low > 0 or high < 0),
        "paired": _paired(records_a, records_b) if records_a is not None and records_b is not None else None,
        "partial_a": run_a.get("partial_note"),
        "partial_b": run_b.get("partial_note"),
        "models_differ": models_differ(run_a, run_b),
    }


def by_task(runs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Run names grouped by task, in run order (runs without a task under ``"?"``)."""
    groups: dict[str, list[str]] = {}
    for name, run in runs.items():
        groups.setdefault(str(run.get("task") or "?"), []).append(name)
    return groups


def task_comparisons(
    output_dir: Path, runs: dict[str, dict[str, Any]], records_of: dict[str, list[EpisodeRecord]] | None = None
) -> list[dict[str, Any]]:
    """Every pair of runs on the same task with different policies, compared (run order).

    Policies differ when their labels do (:func:`policy_labels`, read from each run's
    ``policy_label``): another type or variant, or the same type served by another model.

    ``records_of``: each run's records where already read (the rest are read from disk).
    """
    pairs: list[dict[str, Any]] = []
    cache: dict[str, list[EpisodeRecord]] = dict(records_of or {})

    def records(name: str) -> list[EpisodeRecord]:
        if name not in cache:
            cache[name] = collect_run_records(output_dir / name)
        return cache[name]

    for task, names in by_task(runs).items():
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if _label(runs[a]) == _label(runs[b]):
                    continue
                if not (runs[a]["n"] and runs[b]["n"]):
                    continue
                pairs.append(compare_runs(a, runs[a], b, runs[b], records(a), records(b)))
    return pairs


def _pooled(members: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled ``k``/``n``, ``errors``, ``success_rate`` with its Wilson ``ci95`` and the macro
    rate (the mean of the members' rates) of several run summaries."""
    k = sum(run["k"] for run in members)
    n = sum(run["n"] for run in members)
    rates = [run["success_rate"] for run in members if run["success_rate"] is not None]
    return {
        "k": k,
        "n": n,
        "errors": sum(run["errors"] for run in members),
        "success_rate": success_rate(k, n),
        "ci95": list(wilson_interval(k, n)),
        "macro_success_rate": sum(rates) / len(rates) if rates else None,
    }


def by_policy(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy (:func:`policy_labels`): its runs, pooled k/n with a Wilson interval, and the
    macro average over runs."""
    members: dict[str, list[str]] = {}
    for name, run in runs.items():
        members.setdefault(_label(run), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for label, names in members.items():
        tasks = list(dict.fromkeys(runs[name].get("task") for name in names))
        out[label] = {"runs": names, "tasks": tasks, **_pooled([runs[name] for name in names])}
    return out


def by_group(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Expanded runs (``NAME.<suffix>``, e.g. a LIBERO suite's tasks) grouped under ``NAME``.

    Per group, as benchmark papers report a suite: ``runs`` and ``tasks`` (in run order),
    ``policy``, pooled ``k``/``n`` with ``success_rate`` and its Wilson ``ci95``,
    ``macro_success_rate`` (the mean of the per-task rates, the suite's figure when tasks
    have unequal n), ``errors`` and ``partial`` (any of its runs is partial or unfinished).
    """
    members: dict[str, list[str]] = {}
    for name in runs:
        group, dot, _ = name.partition(".")
        if dot:
            members.setdefault(group, []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for group, names in members.items():
        listed = [runs[name] for name in names]
        out[group] = {
            "runs": names,
            "tasks": [run.get("task") for run in listed],
            "policy": listed[0].get("policy"),
            "partial": any(bool(run.get("partial")) or run.get("state") != "completed" for run in listed),
            **_pooled(listed),
        }
    return out


def _experiment_name(output_dir: Path, manifest: dict | None) -> str:
    if manifest and manifest.get("experiment"):
        return str(manifest["experiment"])
    snapshot = read_snapshot(output_dir)
    if snapshot is not None and snapshot.get("name"):
        return str(snapshot["name"])
    return output_dir.name


def build_experiment_result(output_dir: str | os.PathLike[str], *, write: bool = True) -> dict[str, Any]:
    """Summarize every run of ``output_dir``; write ``experiment_result.json`` when ``write``.

    Layout: ``format_version``, ``experiment``, ``created_at``, ``runs: {NAME: {state,
    error, task, policy, counts {success, failure, timeout, error}, n, k, success_rate,
    ci95 [low, high], ci_method, errors, episodes_total, episodes_recorded,
    missing_episodes, partial (the run's numbers cover less than planned: not completed,
    episodes missing or error episodes), partial_note (why, see
    :func:`arena.outputs.records.partial_note`), server, server_log, issues, latency, seeds,
    num_envs, videos, restarts, machine, warnings, model (what answered, see
    :func:`arena.rollout.run_one.model_record`), policy_label (see :func:`policy_labels`)}}``,
    ``by_task`` (task -> run names),
    ``by_policy`` (pooled and macro rates per policy), ``by_group`` (expanded runs under their
    parent run, e.g. a LIBERO suite's tasks: see :func:`by_group`), ``comparisons`` (every pair of policies on one task: difference and
    its Newcombe interval, see :func:`compare_runs`), ``provenance`` (``provenance.json``)
    and ``overall`` (pooled
    counts, ``n``, ``k``, ``success_rate``, ``ci95``, ``macro_success_rate``: the mean of
    the per-run rates, ``states``: runs per state). A run listed in the manifest with no
    files yet is ``pending``; a failed run stays ``failed`` with its error.
    """
    output_dir = Path(output_dir)
    manifest = read_json(output_dir / MANIFEST_FILE)
    manifest = manifest if isinstance(manifest, dict) else None
    records_of: dict[str, list[EpisodeRecord]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for name in run_names(output_dir, manifest or {}):
        issues: list[str] = []
        records_of[name] = collect_run_records(output_dir / name, issues)
        runs[name] = _summarize(
            output_dir, name, (manifest or {}).get("runs", {}).get(name), records_of[name], issues
        )
    for name, label in policy_labels(runs).items():
        runs[name]["policy_label"] = label
    counts = {outcome: sum(r["counts"][outcome] for r in runs.values()) for outcome in OUTCOMES}
    k = counts["success"]
    n = k + counts["failure"] + counts["timeout"]
    low, high = wilson_interval(k, n)
    rates = [r["success_rate"] for r in runs.values() if r["success_rate"] is not None]
    states: dict[str, int] = {}
    for r in runs.values():
        states[r["state"]] = states.get(r["state"], 0) + 1
    from arena.results.provenance import read_provenance

    result = {
        "format_version": FORMAT_VERSION,
        "experiment": _experiment_name(output_dir, manifest),
        "created_at": utc_now(),
        "runs": runs,
        "by_task": by_task(runs),
        "by_policy": by_policy(runs),
        "by_group": by_group(runs),
        "comparisons": task_comparisons(output_dir, runs, records_of),
        "provenance": read_provenance(output_dir),
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
        write_json_atomic(output_dir / EXPERIMENT_RESULT_FILE, result)
    return result
