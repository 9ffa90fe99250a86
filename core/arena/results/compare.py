"""``arena compare A B``: two experiments (output directories), run by run.

Runs are matched by name. For each pair: both success rates as k/n, the difference
``B - A`` with its 95 % Newcombe hybrid score interval (Newcombe 1998, method 10; never the
difference of two Wilson intervals), whether that interval excludes 0, and — when both
played some of the same seeds — the outcome pairs on those seeds (``only_a``/``only_b``:
seeds only one side solved; a paired view that seeds recorded per episode make possible).
Runs present on one side only are listed as such.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.results.aggregate import build_experiment_result, collect_run_records, compare_runs


def compare_experiments(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> dict[str, Any]:
    """Compare output directories ``a`` and ``b``.

    Returns ``{"a": {experiment, path}, "b": {…}, "runs": [row…], "only_a": [names],
    "only_b": [names]}``; a row holds ``run``, ``task``, ``policy_a``/``policy_b``,
    ``k_a``/``n_a``/``rate_a``, ``k_b``/``n_b``/``rate_b``, ``difference`` (B − A),
    ``ci95``, ``significant`` and ``paired``. Nothing is written into either directory.

    Raises:
        FileNotFoundError: a directory does not exist.
    """
    a, b = Path(a), Path(b)
    for path in (a, b):
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
    result_a = build_experiment_result(a, write=False)
    result_b = build_experiment_result(b, write=False)
    rows = []
    for name, run_a in result_a["runs"].items():
        run_b = result_b["runs"].get(name)
        if run_b is None:
            continue
        # B - A: compare_runs computes first - second, so B goes first.
        row = compare_runs(name, run_b, name, run_a, collect_run_records(b / name), collect_run_records(a / name))
        paired = row["paired"]
        if paired is not None:  # flip the labels back to A/B
            paired = {**paired, "only_a": paired["only_b"], "only_b": paired["only_a"]}
        rows.append(
            {
                "run": name,
                "task": run_a.get("task") or run_b.get("task"),
                "policy_a": row["policy_b"],
                "policy_b": row["policy_a"],
                "k_a": run_a["k"], "n_a": run_a["n"], "rate_a": run_a["success_rate"], "errors_a": run_a["errors"],
                "k_b": run_b["k"], "n_b": run_b["n"], "rate_b": run_b["success_rate"], "errors_b": run_b["errors"],
                "difference": row["difference"],
                "ci95": row["ci95"],
                "ci_method": row["ci_method"],
                "significant": row["significant"],
                "paired": paired,
            }
        )
    return {
        "a": {"experiment": result_a["experiment"], "path": str(a)},
        "b": {"experiment": result_b["experiment"], "path": str(b)},
        "runs": rows,
        "only_a": [n for n in result_a["runs"] if n not in result_b["runs"]],
        "only_b": [n for n in result_b["runs"] if n not in result_a["runs"]],
    }
