"""Merge a finished (or running) experiment's records into ``experiment_result.json``.

Reads the output directory layout::

    manifest.json  experiment.yaml
    <run>/episodes.jsonl  <run>/run_result.json  <run>/status.json  <run>/server.log
    <run>/shards/<K>/episodes.jsonl  (+ run_result.json, status.json)

Records of one run (unsharded and all shards) are merged by ``episode_index``: a non-error
record wins over an error one, among equals the latest. Success rates are ``k/n`` over
non-error episodes with a 95 % Wilson interval; errors are reported next to them, never as
failures. Groups of runs (a policy's runs, a suite's tasks) get task-averaged and
episode-weighted rates with stratified intervals (:mod:`arena.results.suite`); policies on one
task are compared paired or unpaired (:mod:`arena.results.paired`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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
from arena.outputs.metrics import summarize_metrics
from arena.outputs.stats import success_rate, wilson_interval
from arena.outputs.records import (
    FORMAT_VERSION,
    OUTCOMES,
    EpisodeRecord,
    NON_FINITE_WARNING_START,
    count_outcomes,
    merge_records,
    non_finite_episodes,
    non_finite_warning,
    partial_note,
    read_json,
    read_records,
    utc_now,
    write_json_atomic,
)
from arena.results.paired import compare_rates, holm
from arena.results.suite import suite_difference, suite_rates

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
    """One run's entry of ``experiment_result.json`` (see :func:`build_experiment_result`)."""
    issues: list[str] = []
    records = counted_run_records(Path(output_dir) / name, issues)
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
    stop = read_stop(run_dir)
    if stop is not None:  # a run stopped by its rule is complete at the stopping index
        total = stop["episodes_used"]
        stop = {**stop, "wilson_ci95": [low, high]}
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
        "server": server,
        "server_log": f"{name}/{SERVER_LOG}" if server_log.exists() else None,
        "issues": issues,
        "latency": latency_summary(records),
        "metrics": summarize_metrics(records, entry.get("metric_bounds")),
        "non_finite": non_finite_episodes(records) or None,
        "seeds": seeds,
        "num_envs": entry.get("num_envs"),
        "videos": sum(1 for r in records if r.video),
        "restarts": restarts if isinstance(restarts, int) else 0,
        "machine": machine,
        "warnings": warnings,
        "model": model,
        "stop": stop,
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


def _pair_table(paired: dict[str, int] | None) -> dict[str, int] | None:
    """:func:`_paired`'s counts as :func:`arena.results.paired.pair_outcomes` names them."""
    if paired is None:
        return None
    return {"episodes": paired["seeds"], "both": paired["both"], "neither": paired["neither"],
            "only_1": paired["only_a"], "only_2": paired["only_b"]}


def compare_runs(
    name_a: str, run_a: dict, name_b: str, run_b: dict, records_a=None, records_b=None,
    setup_differences: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``a`` vs ``b``: rates, the difference ``a - b``, its 95 % interval and a test.

    The design is paired (McNemar's exact test, Newcombe's paired interval: see
    :mod:`arena.results.paired`) when ``setup_differences`` is an empty list (the runs share
    environment, task, init states and seeds per episode) and both recorded some common seeds;
    else unpaired (Fisher's exact test, Newcombe's interval for independent rates), with
    ``design_reason`` saying why. ``None`` for ``setup_differences``: the setups are unknown.
    ``difference``/``ci95``/``p_value`` are ``None`` when either side has no non-error
    episode. ``significant``: the interval excludes 0. ``paired`` counts outcome pairs on
    common seeds.
    """
    paired = _paired(records_a, records_b) if records_a is not None and records_b is not None else None
    if setup_differences is None:
        why = "the runs' setups are unknown, so episodes cannot be matched"
    elif setup_differences:
        keys = ", ".join(d["key"] for d in setup_differences[:3]) + (" …" if len(setup_differences) > 3 else "")
        why = f"the runs' setups differ ({keys}), so episode i is not the same situation in both"
    else:
        why = None if paired else "no seed played by both runs without an error"
    figures = compare_rates(
        run_a["k"], run_a["n"], run_b["k"], run_b["n"],
        pairs=_pair_table(paired) if why is None else None, unpaired_because=why,
    )
    diff, ci = figures["difference"], figures["ci95"]
    return {
        "a": name_a,
        "b": name_b,
        "task": run_a.get("task"),
        "policy_a": _label(run_a),
        "policy_b": _label(run_b),
        "k_a": run_a["k"], "n_a": run_a["n"], "rate_a": run_a["success_rate"],
        "k_b": run_b["k"], "n_b": run_b["n"], "rate_b": run_b["success_rate"],
        "difference": diff,
        "ci95": ci,
        "ci_method": figures["ci_method"],
        "significant": diff is not None and (ci[0] > 0 or ci[1] < 0),
        "design": figures["design"],
        "design_reason": figures["design_reason"],
        "p_value": figures["p_value"],
        "test_method": figures["test_method"],
        "discordant": figures["discordant"],
        "paired": paired,
        "partial_a": run_a.get("partial_note"),
        "partial_b": run_b.get("partial_note"),
        "models_differ": models_differ(run_a, run_b),
    }


#: What the report and ``arena compare`` say about Holm-adjusted p-values next to intervals.
HOLM_NOTE = (
    "p-values adjusted for the {m} tests shown (Holm 1979: family-wise error rate 5%); "
    "the intervals beside them are 95% for each difference alone, not adjusted"
)


def adjust_holm(rows: list[dict[str, Any]]) -> str | None:
    """Add ``p_holm`` and ``significant_holm`` (``p_holm < 0.05``) to each comparison row.

    Returns the note to print beside them (:data:`HOLM_NOTE`), ``None`` when fewer than two
    rows have a test (nothing to adjust: ``p_holm`` equals ``p_value``).
    """
    adjusted = holm([row.get("p_value") for row in rows])
    for row, p in zip(rows, adjusted):
        row["p_holm"] = p
        row["significant_holm"] = p is not None and p < 0.05
    tested = sum(p is not None for p in adjusted)
    return HOLM_NOTE.format(m=tested) if tested > 1 else None


def by_task(runs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Run names grouped by task, in run order (runs without a task under ``"?"``)."""
    groups: dict[str, list[str]] = {}
    for name, run in runs.items():
        groups.setdefault(str(run.get("task") or "?"), []).append(name)
    return groups


def task_comparisons(
    output_dir: Path,
    runs: dict[str, dict[str, Any]],
    records_of: dict[str, list[EpisodeRecord]] | None = None,
    setups: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every pair of runs on the same task with different policies, compared (run order).

    Policies differ when their labels do (:func:`policy_labels`, read from each run's
    ``policy_label``): another type or variant, or the same type served by another model.
    ``setups``: each run's setup (:func:`arena.results.setups.run_setup`), which decides the
    design (:func:`arena.results.paired.pairing_differences`); without it, the pairs are
    unpaired. ``records_of``: each run's records where already read (the rest are read from
    disk). The rows carry Holm-adjusted p-values (:func:`adjust_holm`).
    """
    from arena.results.paired import pairing_differences

    pairs: list[dict[str, Any]] = []
    cache: dict[str, list[EpisodeRecord]] = dict(records_of or {})

    def records(name: str) -> list[EpisodeRecord]:
        if name not in cache:
            cache[name] = counted_run_records(output_dir / name)
        return cache[name]

    for task, names in by_task(runs).items():
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if _label(runs[a]) == _label(runs[b]):
                    continue
                if not (runs[a]["n"] and runs[b]["n"]):
                    continue
                differences = pairing_differences(setups.get(a), setups.get(b)) if setups is not None else None
                pairs.append(compare_runs(a, runs[a], b, runs[b], records(a), records(b), differences))
    adjust_holm(pairs)
    return pairs


def _aggregate(members: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs (one stratum each) summarized: ``k``/``n``, ``errors``, the episode-weighted
    ``success_rate`` with its stratified ``ci95`` and the task-averaged ``macro_success_rate``
    with its ``macro_ci95`` (:func:`arena.results.suite.suite_rates`), and both in full under
    ``episode_weighted`` / ``task_averaged`` with their ``ci_method``."""
    rates = suite_rates([run["k"] for run in members], [run["n"] for run in members])
    pooled, macro = rates["episode_weighted"], rates["task_averaged"]
    return {
        "k": rates["k"],
        "n": rates["n"],
        "errors": sum(run["errors"] for run in members),
        "success_rate": pooled["success_rate"],
        "ci95": pooled["ci95"] or [0.0, 1.0],
        "ci_method": pooled["ci_method"],
        "macro_success_rate": macro["success_rate"],
        "macro_ci95": macro["ci95"],
        "episode_weighted": pooled,
        "task_averaged": macro,
    }


def by_policy(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy (:func:`policy_labels`): its runs and tasks, the episode-weighted and the
    task-averaged rate over its runs, each with a stratified interval (:func:`_aggregate`)."""
    members: dict[str, list[str]] = {}
    for name, run in runs.items():
        members.setdefault(_label(run), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for label, names in members.items():
        tasks = list(dict.fromkeys(runs[name].get("task") for name in names))
        out[label] = {"runs": names, "tasks": tasks, **_aggregate([runs[name] for name in names])}
    return out


def by_group(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Expanded runs (``NAME.<suffix>``, e.g. a LIBERO suite's tasks) grouped under ``NAME``.

    Per group, as benchmark papers report a suite: ``runs`` and ``tasks`` (in run order),
    ``policy``, ``k``/``n``, the episode-weighted ``success_rate`` with its stratified
    ``ci95``, the task-averaged ``macro_success_rate`` (the suite's figure in papers) with its
    ``macro_ci95`` (see :mod:`arena.results.suite`), ``errors`` and ``partial`` (any of its
    runs is partial or unfinished).
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
            "policy_label": _label(listed[0]),
            "partial": any(bool(run.get("partial")) or run.get("state") != "completed" for run in listed),
            **_aggregate(listed),
        }
    return out


def suite_comparison(
    group_1: dict[str, Any], group_2: dict[str, Any], task_rows: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """Two suites (:func:`by_group` entries) compared over their common tasks, task-averaged.

    ``task_rows``: task -> the :func:`compare_runs` row of that task (first = ``group_1``'s
    run as ``a``). Returns :func:`arena.results.suite.suite_difference` (second − first,
    i.e. ``b − a`` of the rows) plus ``common_tasks`` and ``tasks_only_one_side``.
    """
    common = [t for t in group_1["tasks"] if t in group_2["tasks"] and t in task_rows]
    rows = []
    for task in common:
        row = task_rows[task]
        pairs = None
        if row["design"] == "paired" and row["paired"]:
            pairs = {"episodes": row["paired"]["seeds"], "only_1": row["paired"]["only_a"], "only_2": row["paired"]["only_b"]}
        rows.append({"task": task, "design": row["design"], "k_1": row["k_a"], "n_1": row["n_a"],
                     "k_2": row["k_b"], "n_2": row["n_b"], "pairs": pairs})
    result = suite_difference(rows)
    if result is None:
        return None
    only = len(set(group_1["tasks"]) ^ set(group_2["tasks"]))
    return {**result, "common_tasks": common, "tasks_only_one_side": only}


def group_comparisons(runs: dict[str, dict[str, Any]], groups: dict[str, dict[str, Any]],
                      comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every pair of suites (groups) of different policies sharing tasks: ``b − a`` task-averaged.

    Uses the per-task rows of ``comparisons`` (:func:`task_comparisons`), whose difference is
    ``a − b``; the suite row keeps ``first``/``second`` in group order and reports
    ``first − second`` like the task rows.
    """
    rows_of: dict[tuple[str, str], dict[str, Any]] = {(c["a"], c["b"]): c for c in comparisons}
    names = list(groups)
    out = []
    for i, g1 in enumerate(names):
        for g2 in names[i + 1 :]:
            first, second = groups[g1], groups[g2]
            if first["policy_label"] == second["policy_label"]:
                continue
            task_rows: dict[str, dict[str, Any]] = {}
            for ra in first["runs"]:
                for rb in second["runs"]:
                    row = rows_of.get((ra, rb))
                    if row is not None:
                        task_rows[row["task"]] = row
            result = suite_comparison(first, second, task_rows)
            if result is None:
                continue
            out.append({"a": g1, "b": g2, "policy_a": first["policy_label"], "policy_b": second["policy_label"],
                        **result, "difference": -result["difference"],
                        "ci95": [-result["ci95"][1], -result["ci95"][0]]})
    return out


def _experiment_name(output_dir: Path, manifest: dict | None) -> str:
    if manifest and manifest.get("experiment"):
        return str(manifest["experiment"])
    snapshot = read_snapshot(output_dir)
    if snapshot is not None and snapshot.get("name"):
        return str(snapshot["name"])
    return output_dir.name


#: Every method name a figure of ``experiment_result.json`` or ``arena compare --json`` may
#: carry, with the one line the report and ``arena compare`` explain it by.
METHODS = {
    "wilson": "Wilson score interval of one run's k/n (fixed number of episodes); also of a boolean (0/1) "
    "episode metric's mean.",
    "stratified-wilson-effective-n": "Wilson interval at a suite's weighted rate with the effective number of "
    "episodes of its tasks (strata), so each task contributes its own variance.",
    "newcombe-hybrid-score": "Newcombe's (1998, method 10) interval for the difference of two independent rates.",
    "newcombe-paired-hybrid-score": "Newcombe's (1998, method 10 for paired data) interval for the difference of "
    "two rates measured on the same episodes (seeds, init states).",
    "mcnemar-exact": "McNemar's exact test: a binomial test on the episodes only one of two paired runs solved.",
    "fisher-exact": "Fisher's exact test of two independent rates (two-sided).",
    "holm": "Holm's step-down adjustment of the p-values shown together (family-wise error 5%).",
    "stratified-adjusted-wald-per-task": "A suite difference: the mean of per-task differences, its variance summed "
    "over tasks (Agresti-Caffo for unpaired tasks, Agresti-Min for paired).",
    "glm-binomial-cluster-robust": "A perturbation sweep's logistic model of success on its factor levels "
    "(statsmodels GLM, Binomial), with standard errors clustered by episode seed (the sweep's runs share seeds).",
    "firth-penalized-logistic": "Firth's (1993) bias-reduced logistic regression, used when a sweep's cell solved "
    "every episode or none (plain maximum likelihood is infinite there); model-based Wald intervals.",
    "betting-confidence-sequence": "Waudby-Smith & Ramdas (2023) betting confidence sequence: valid at every "
    "episode count, so after stopping early too.",
    "betting-bounded-mean": "An episode metric with known bounds (declared by the environment): the hedged "
    "betting confidence interval for the mean of a bounded variable (Waudby-Smith & Ramdas 2023, JRSS-B 86(1), "
    "section 4); valid for any distribution inside the bounds, never outside them, never of zero width.",
    "student-t": "An episode metric without known bounds: Student's t interval of the mean (quantile from "
    "scipy.stats.t); assumes roughly normal episode values.",
}


def _multiplicity_note(comparisons: list[dict[str, Any]]) -> str | None:
    tested = sum(c.get("p_value") is not None for c in comparisons)
    return HOLM_NOTE.format(m=tested) if tested > 1 else None


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
    its Newcombe interval, see :func:`compare_runs`), ``delay_sweeps`` (live runs differing only in
    their delay, each paired with its ``d = 0`` run: :mod:`arena.results.delay`), ``provenance`` (``provenance.json``)
    and ``overall`` (pooled
    counts, ``n``, ``k``, ``success_rate``, ``ci95``, ``macro_success_rate``: the mean of
    the per-run rates, ``states``: runs per state), ``attribution`` (perturbation sweeps: paired
    differences from nominal and a logistic model per factor level, see
    :mod:`arena.results.attribution`; ``None`` without a sweep). A run listed in the manifest with no
    files yet is ``pending``; a failed run stays ``failed`` with its error.
    """
    output_dir = Path(output_dir)
    manifest = read_json(output_dir / MANIFEST_FILE)
    manifest = manifest if isinstance(manifest, dict) else None
    records_of: dict[str, list[EpisodeRecord]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for name in run_names(output_dir, manifest or {}):
        issues: list[str] = []
        records_of[name] = counted_run_records(output_dir / name, issues)
        runs[name] = _summarize(
            output_dir, name, (manifest or {}).get("runs", {}).get(name), records_of[name], issues
        )
    for name, label in policy_labels(runs).items():
        runs[name]["policy_label"] = label
    counts = {outcome: sum(r["counts"][outcome] for r in runs.values()) for outcome in OUTCOMES}
    states: dict[str, int] = {}
    for r in runs.values():
        states[r["state"]] = states.get(r["state"], 0) + 1
    from arena.results.setups import run_setups
    from arena.results.provenance import read_provenance

    from arena.results.attribution import attribution

    setups = run_setups(output_dir, runs)
    comparisons = task_comparisons(output_dir, runs, records_of, setups)
    drivers = attribution(output_dir, runs, records_of, setups)
    # a perturbation sweep's runs are levels of one policy on one task, not a suite's tasks
    groups = {g: v for g, v in by_group(runs).items() if not (drivers and g in drivers["sweeps"])}
    from arena.outputs.layout import read_snapshot
    from arena.results.delay import delay_sweeps

    snapshot = read_snapshot(output_dir) or {}
    sweeps = delay_sweeps(runs, snapshot.get("runs") if isinstance(snapshot.get("runs"), dict) else {}, records_of, setups,
                          compare_runs=compare_runs, adjust_holm=adjust_holm)
    overall = _aggregate(list(runs.values()))
    result = {
        "format_version": FORMAT_VERSION,
        "experiment": _experiment_name(output_dir, manifest),
        "created_at": utc_now(),
        "runs": runs,
        "by_task": by_task(runs),
        "by_policy": by_policy(runs),
        "by_group": groups,
        "comparisons": comparisons,
        "group_comparisons": group_comparisons(runs, groups, comparisons),
        "delay_sweeps": sweeps,
        "multiplicity": _multiplicity_note(comparisons),
        "methods": METHODS,
        "provenance": read_provenance(output_dir),
        "attribution": drivers,
        "overall": {
            **overall,
            "counts": counts,
            "aggregation": "episode-weighted over runs (stratified by run)",
            "states": states,
        },
    }
    if write:
        write_json_atomic(output_dir / EXPERIMENT_RESULT_FILE, result)
    return result
