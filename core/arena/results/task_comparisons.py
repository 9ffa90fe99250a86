"""Runs of one task compared pairwise: each pair's difference, interval and test, Holm-adjusted.

:func:`compare_runs` compares two runs (paired when their setups agree and they share seeds,
else unpaired: :mod:`arena.results.difference_stats`); :func:`task_comparisons` compares every
pair of runs on one task whose policies differ (:func:`arena.results.labels.policy_labels`) and
adjusts their p-values together (:func:`adjust_holm`). ``arena compare`` and the delay sweeps
use the same two functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arena.outputs.records import EpisodeRecord
from arena.results.difference_stats import compare_rates, holm, pair_outcomes, pairing_differences
from arena.results.groups import by_task
from arena.results.labels import models_differ, run_label
from arena.results.methods import holm_note
from arena.results.run_summary import counted_run_records


def _outcomes(records: list[EpisodeRecord]) -> dict[int, bool]:
    """Seed -> success over the non-error records."""
    return {r.seed: r.outcome == "success" for r in records if r.outcome != "error"}


def _by_seed(table: dict[str, int] | None) -> dict[str, int] | None:
    """:func:`~arena.results.difference_stats.pair_outcomes`' table over seeds as a comparison
    row's ``paired`` names it: ``{seeds, both, neither, only_a, only_b}``."""
    if table is None:
        return None
    return {"seeds": table["episodes"], "both": table["both"], "neither": table["neither"],
            "only_a": table["only_1"], "only_b": table["only_2"]}


def compare_runs(
    name_a: str, run_a: dict, name_b: str, run_b: dict, records_a=None, records_b=None,
    setup_differences: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``a`` vs ``b``: rates, the difference ``a - b``, its 95 % interval and a test.

    The design is paired (McNemar's exact test, Newcombe's paired interval: see
    :mod:`arena.results.difference_stats`) when ``setup_differences`` is an empty list (the runs share
    environment, task, init states and seeds per episode) and both recorded some common seeds;
    else unpaired (Fisher's exact test, Newcombe's interval for independent rates), with
    ``design_reason`` saying why. ``None`` for ``setup_differences``: the setups are unknown.
    ``difference``/``ci95``/``p_value`` are ``None`` when either side has no non-error
    episode. ``significant``: the interval excludes 0. ``paired`` counts outcome pairs on
    common seeds.
    """
    table = (pair_outcomes(_outcomes(records_a), _outcomes(records_b))
             if records_a is not None and records_b is not None else None)
    if setup_differences is None:
        why = "the runs' setups are unknown, so episodes cannot be matched"
    elif setup_differences:
        keys = ", ".join(d["key"] for d in setup_differences[:3]) + (" …" if len(setup_differences) > 3 else "")
        why = f"the runs' setups differ ({keys}), so episode i is not the same situation in both"
    else:
        why = None if table else "no seed played by both runs without an error"
    figures = compare_rates(
        run_a["k"], run_a["n"], run_b["k"], run_b["n"],
        pairs=table if why is None else None, unpaired_because=why,
    )
    diff, ci = figures["difference"], figures["ci95"]
    return {
        "a": name_a,
        "b": name_b,
        "task": run_a.get("task"),
        "policy_a": run_label(run_a),
        "policy_b": run_label(run_b),
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
        "paired": _by_seed(table),
        "partial_a": run_a.get("partial_note"),
        "partial_b": run_b.get("partial_note"),
        "models_differ": models_differ(run_a, run_b),
    }


def adjust_holm(rows: list[dict[str, Any]]) -> str | None:
    """Add ``p_holm`` and ``significant_holm`` (``p_holm < 0.05``) to each comparison row.

    Returns the note to print beside them (:func:`arena.results.methods.holm_note`), ``None`` when fewer than two
    rows have a test (nothing to adjust: ``p_holm`` equals ``p_value``).
    """
    adjusted = holm([row.get("p_value") for row in rows])
    for row, p in zip(rows, adjusted):
        row["p_holm"] = p
        row["significant_holm"] = p is not None and p < 0.05
    return holm_note(adjusted)


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
    design (:func:`arena.results.difference_stats.pairing_differences`); without it, the pairs are
    unpaired. ``records_of``: each run's records where already read (the rest are read from
    disk). The rows carry Holm-adjusted p-values (:func:`adjust_holm`).
    """
    pairs: list[dict[str, Any]] = []
    cache: dict[str, list[EpisodeRecord]] = dict(records_of or {})

    def records(name: str) -> list[EpisodeRecord]:
        if name not in cache:
            cache[name] = counted_run_records(output_dir / name)
        return cache[name]

    for task, names in by_task(runs).items():
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if run_label(runs[a]) == run_label(runs[b]):
                    continue
                if not (runs[a]["n"] and runs[b]["n"]):
                    continue
                differences = pairing_differences(setups.get(a), setups.get(b)) if setups is not None else None
                pairs.append(compare_runs(a, runs[a], b, runs[b], records(a), records(b), differences))
    adjust_holm(pairs)
    return pairs

