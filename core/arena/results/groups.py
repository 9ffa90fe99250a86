"""Runs grouped: by task, by policy, and expanded runs (a suite's tasks) under their parent.

Each group of runs gets the episode-weighted and the task-averaged rate with stratified
intervals (:func:`pooled_rates`, from :mod:`arena.results.suite_stats`); suites of different
policies are compared over their common tasks (:func:`group_comparisons`).
"""

from __future__ import annotations

from typing import Any

from arena.results.labels import run_label
from arena.results.suite_stats import suite_difference, suite_rates


def by_task(runs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Run names grouped by task, in run order (runs without a task under ``"?"``)."""
    groups: dict[str, list[str]] = {}
    for name, run in runs.items():
        groups.setdefault(str(run.get("task") or "?"), []).append(name)
    return groups



def pooled_rates(members: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs (one stratum each) summarized: ``k``/``n``, ``errors``, the episode-weighted
    ``success_rate`` with its stratified ``ci95`` and the task-averaged ``macro_success_rate``
    with its ``macro_ci95`` (:func:`arena.results.suite_stats.suite_rates`), and both in full under
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
    """Per policy (:func:`arena.results.labels.policy_labels`): its runs and tasks, the episode-weighted and the
    task-averaged rate over its runs, each with a stratified interval (:func:`pooled_rates`)."""
    members: dict[str, list[str]] = {}
    for name, run in runs.items():
        members.setdefault(run_label(run), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for label, names in members.items():
        tasks = list(dict.fromkeys(runs[name].get("task") for name in names))
        out[label] = {"runs": names, "tasks": tasks, **pooled_rates([runs[name] for name in names])}
    return out


def by_group(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Expanded runs (``NAME.<suffix>``, e.g. a LIBERO suite's tasks) grouped under ``NAME``.

    Per group, as benchmark papers report a suite: ``runs`` and ``tasks`` (in run order),
    ``policy``, ``k``/``n``, the episode-weighted ``success_rate`` with its stratified
    ``ci95``, the task-averaged ``macro_success_rate`` (the suite's figure in papers) with its
    ``macro_ci95`` (see :mod:`arena.results.suite_stats`), ``errors`` and ``partial`` (any of its
    runs is partial or unfinished).
    """
    members: dict[str, list[str]] = {}
    parents: dict[str, set[str]] = {}
    for name in runs:
        group, dot, _ = name.partition(".")
        if dot:
            parents.setdefault(group, set()).add(run_label(runs[name]))
    for name in runs:
        group, dot, _ = name.partition(".")
        if dot:
            # A matrix over checkpoints (or models) makes one suite per policy, never one pool
            # of them: the group is then named after its policy too.
            key = group if len(parents[group]) == 1 else f"{group} · {run_label(runs[name]).partition(' · ')[2] or run_label(runs[name])}"
            members.setdefault(key, []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for group, names in members.items():
        listed = [runs[name] for name in names]
        out[group] = {
            "runs": names,
            "tasks": [run.get("task") for run in listed],
            "policy": listed[0].get("policy"),
            "policy_label": run_label(listed[0]),
            "partial": any(bool(run.get("partial")) or run.get("state") != "completed" for run in listed),
            **pooled_rates(listed),
        }
    return out


def suite_comparison(
    group_1: dict[str, Any], group_2: dict[str, Any], task_rows: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """Two suites (:func:`by_group` entries) compared over their common tasks, task-averaged.

    ``task_rows``: task -> the :func:`arena.results.task_comparisons.compare_runs` row of that task (first = ``group_1``'s
    run as ``a``). Returns :func:`arena.results.suite_stats.suite_difference` (second − first,
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

    Uses the per-task rows of ``comparisons`` (:func:`arena.results.task_comparisons.task_comparisons`), whose difference is
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

