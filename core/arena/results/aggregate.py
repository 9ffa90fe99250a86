"""Merge a finished (or running) experiment's records into ``experiment_result.json``.

Reads the output directory layout::

    manifest.json  experiment.yaml  <run>/...  (one run: :mod:`arena.results.run_summary`)

and puts together, in named steps: each run's summary (:mod:`arena.results.run_summary`), the
policy labels (:mod:`arena.results.labels`), the groupings by task, policy and suite with their
pooled and task-averaged rates (:mod:`arena.results.groups`), the comparisons of policies on
one task (:mod:`arena.results.task_comparisons`) and of suites, the delay sweeps
(:mod:`arena.results.delay`), the perturbation attribution (:mod:`arena.results.attribution`)
and the methods used (:mod:`arena.results.methods`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.outputs.layout import EXPERIMENT_RESULT_FILE, MANIFEST_FILE, read_snapshot, run_names
from arena.outputs.records import FORMAT_VERSION, OUTCOMES, EpisodeRecord, read_json, utc_now, write_json_atomic
from arena.results.attribution import attribution
from arena.results.delay import delay_sweeps
from arena.results.groups import by_group, by_policy, by_task, group_comparisons, pooled_rates
from arena.results.labels import policy_labels
from arena.results.matrix import matrices
from arena.results.methods import METHODS, holm_note
from arena.results.provenance import read_provenance
from arena.results.run_summary import counted_run_records, summarize_records
from arena.results.setups import run_setups
from arena.results.task_comparisons import task_comparisons


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
    :func:`arena.outputs.records.partial_note`), error_note (why its episodes errored, one
    line with a count: :func:`arena.results.run_summary.error_note`), note (what the console
    summary and the report show beside the run's numbers: partial_note, its error count
    replaced by error_note), server, server_log, issues, latency, seeds,
    num_envs, videos, restarts, machine, warnings, model (what answered, see
    :func:`arena.rollout.run_one.model_record`), policy_label (see :func:`arena.results.labels.policy_labels`)}}``,
    ``by_task`` (task -> run names),
    ``by_policy`` (pooled and macro rates per policy), ``by_group`` (expanded runs under their
    parent run, e.g. a LIBERO suite's tasks: see :func:`arena.results.groups.by_group`), ``comparisons`` (every pair of policies on one task: difference and
    its Newcombe interval, see :func:`arena.results.task_comparisons.compare_runs`), ``delay_sweeps`` (live runs differing only in
    their delay, each paired with its ``d = 0`` run: :mod:`arena.results.delay`), ``matrices`` (a
    matrix's runs laid out by its axes, one cell per run, a checkpoint axis as a series:
    :mod:`arena.results.matrix`), ``provenance`` (``provenance.json``)
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
        runs[name] = summarize_records(
            output_dir, name, (manifest or {}).get("runs", {}).get(name), records_of[name], issues
        )
    for name, label in policy_labels(runs).items():
        runs[name]["policy_label"] = label
    counts = {outcome: sum(r["counts"][outcome] for r in runs.values()) for outcome in OUTCOMES}
    states: dict[str, int] = {}
    for r in runs.values():
        states[r["state"]] = states.get(r["state"], 0) + 1
    setups = run_setups(output_dir, runs)
    comparisons = task_comparisons(output_dir, runs, records_of, setups)
    drivers = attribution(output_dir, runs, records_of, setups)
    # a perturbation sweep's runs are levels of one policy on one task, not a suite's tasks
    snapshot = read_snapshot(output_dir) or {}
    sweeps = delay_sweeps(runs, snapshot.get("runs") if isinstance(snapshot.get("runs"), dict) else {}, records_of, setups)
    # nor are a delay sweep's runs (its delays) a suite's tasks
    swept = {row["run"] for sweep in sweeps for row in sweep["rows"]}
    perturbed = {name for s in (drivers or {}).get("sweeps", {}).values()
                 for name in [s.get("nominal"), *(r.get("run") for r in s.get("rows", []))] if name}
    # nor a matrix's cells (its axis values, checkpoints or horizons): each is its own cell
    laid_out = matrices(runs, snapshot.get("runs") if isinstance(snapshot.get("runs"), dict) else {}, swept | perturbed)
    in_matrix = {cell["run"] for m in laid_out for cell in m["cells"].values()}
    groups = {g: v for g, v in by_group(runs).items()
              if not (drivers and g in drivers["sweeps"]) and not (swept | in_matrix) & set(v["runs"])}
    overall = pooled_rates(list(runs.values()))
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
        "matrices": laid_out,
        "multiplicity": holm_note(c.get("p_value") for c in comparisons),
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

