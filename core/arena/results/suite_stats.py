"""A suite's success rate over its tasks, and two suites compared task by task.

A suite (LIBERO's 10 tasks of one suite, a Meta-World set) is a fixed set of tasks; its
episodes cluster within tasks (a task's episodes share its difficulty). Two figures:

- **task-averaged** (``macro``): the mean of the task rates, the number benchmark papers print;
- **episode-weighted** (``pooled``): all successes over all episodes, each task weighted by its
  episodes.

Both are weighted means ``sum_t w_t p_t`` of the independent task rates (``w_t = 1/T``, resp.
``n_t / N``). Each gets a stratified Wilson interval: the Wilson interval at the weighted rate
with an *effective* number of episodes, the smaller of Kish's effective sample size of the
weights, ``1 / sum_t(w_t^2 / n_t)``, and ``p(1-p) / v`` where ``v = sum_t w_t^2 p_t(1-p_t)/n_t``
is the stratified variance (the design-effect form of Korn & Graubard 1998, *Survey
Methodology* 24:193–201; Wilson form as in Dean & Pagano 2015, *J. Survey Stat. Methodol.*
3:484–503). Each task contributes its own binomial variance; the interval is never the Wilson
interval of the pooled counts where tasks of unequal n make the pooled variance wrong. The
interval is for *these* tasks (the suite as defined), not for a population of tasks the suite
would be a sample of. With equal episodes per task and equal rates it is the pooled Wilson
interval. Coverage by simulation (tests/results/test_paired_and_suite_stats.py): ≥ 94 % over realistic
suites (10 tasks × 20–50 episodes); below that with one to five episodes per task.

:func:`suite_difference` compares two suites over their common tasks: the task-averaged
difference with a stratified adjusted-Wald interval, each task's variance from the
Agresti–Caffo adjustment (one success and one failure added per side: Agresti & Caffo 2000,
*Am. Stat.* 54:280–288) for unpaired runs, or from Agresti & Min's (0.5 added to each cell of
the pairs' table: *Stat. Med.* 2005, 24:729–740) for paired ones.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from arena.outputs.run_stats import Z95

STRATIFIED_METHOD = "stratified-wilson-effective-n"
DIFFERENCE_METHOD = "stratified-adjusted-wald-per-task"


def stratified_wilson(ks: Sequence[int], ns: Sequence[int], weights: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """``sum_t w_t k_t/n_t`` with its stratified Wilson interval (see the module docstring).

    ``ks``, ``ns``, ``weights``: one per stratum (task), every ``n_t >= 1``, weights summing
    to 1. Returns ``(rate, low, high)`` in ``[0, 1]``.

    Raises:
        ValueError: lengths differ, no stratum, or a stratum without episodes.
    """
    if not (len(ks) == len(ns) == len(weights)) or not ks or min(ns) < 1:
        raise ValueError("need one k, n >= 1 and weight per stratum, at least one stratum")
    rates = [k / n for k, n in zip(ks, ns)]
    rate = sum(w * p for w, p in zip(weights, rates))
    kish = 1.0 / sum(w * w / n for w, n in zip(weights, ns))
    variance = sum(w * w * p * (1 - p) / n for w, p, n in zip(weights, rates, ns))
    n_eff = kish
    if variance > 0 and 0 < rate < 1:
        n_eff = min(kish, rate * (1 - rate) / variance)
    low, high = _wilson_continuous(rate, n_eff, z)
    return rate, low, high


def _wilson_continuous(p: float, n: float, z: float) -> tuple[float, float]:
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if p <= 0 else max(0.0, center - half)
    high = 1.0 if p >= 1 else min(1.0, center + half)
    return low, high


def suite_rates(ks: Sequence[int], ns: Sequence[int], z: float = Z95) -> dict[str, Any]:
    """Task-averaged and episode-weighted rate of a suite, each with its stratified interval.

    ``ks``, ``ns``: successes and (non-error) episodes per task; tasks with ``n == 0`` do not
    count (``tasks_without_episodes`` says how many). Returns ``{tasks, n, k,
    tasks_without_episodes, task_averaged: {success_rate, ci95, ci_method}, episode_weighted:
    {…}}``; rates and intervals are ``None`` without any episode. Intervals lie in ``[0, 1]``.

    Raises:
        ValueError: ``ks`` and ``ns`` differ in length.
    """
    if len(ks) != len(ns):
        raise ValueError("need one k and one n per task")
    rows = [(k, n) for k, n in zip(ks, ns) if n]
    total = sum(n for _, n in rows)
    out: dict[str, Any] = {
        "tasks": len(rows),
        "n": total,
        "k": sum(k for k, _ in rows),
        "tasks_without_episodes": len(ks) - len(rows),
    }
    for name in ("task_averaged", "episode_weighted"):
        out[name] = {"success_rate": None, "ci95": None, "ci_method": STRATIFIED_METHOD}
    if not rows:
        return out
    k_s, n_s = [k for k, _ in rows], [n for _, n in rows]
    for name, weights in (("task_averaged", [1 / len(rows)] * len(rows)), ("episode_weighted", [n / total for n in n_s])):
        rate, low, high = stratified_wilson(k_s, n_s, weights, z)
        out[name] = {"success_rate": rate, "ci95": [low, high], "ci_method": STRATIFIED_METHOD}
    return out


def task_difference_variance(row: dict[str, Any]) -> float:
    """The adjusted variance of one task's difference (second − first) from its counts.

    ``row``: ``{design, k_1, n_1, k_2, n_2, pairs}`` (``pairs``: :func:`arena.results.difference_stats.pair_outcomes`).
    """
    if row["design"] == "paired":
        p = row["pairs"]
        b, c, m = p["only_1"] + 0.5, p["only_2"] + 0.5, p["episodes"] + 2.0
        return ((b + c) - (c - b) ** 2 / m) / (m * m)
    a = (row["k_1"] + 1) / (row["n_1"] + 2)
    b = (row["k_2"] + 1) / (row["n_2"] + 2)
    return a * (1 - a) / (row["n_1"] + 2) + b * (1 - b) / (row["n_2"] + 2)


def task_difference_estimate(row: dict[str, Any]) -> float:
    """The adjusted difference (second − first) of one task, matching :func:`task_difference_variance`."""
    if row["design"] == "paired":
        p = row["pairs"]
        return (p["only_2"] - p["only_1"]) / (p["episodes"] + 2.0)
    return (row["k_2"] + 1) / (row["n_2"] + 2) - (row["k_1"] + 1) / (row["n_1"] + 2)


def _raw_difference(row: dict[str, Any]) -> float:
    if row["design"] == "paired":
        p = row["pairs"]
        return (p["only_2"] - p["only_1"]) / p["episodes"]
    return row["k_2"] / row["n_2"] - row["k_1"] / row["n_1"]


def suite_difference(task_rows: Sequence[dict[str, Any]], z: float = Z95) -> dict[str, Any] | None:
    """Task-averaged difference (second − first) of two suites over their common tasks.

    ``task_rows``: one row per common task, ``{task, design, k_1, n_1, k_2, n_2, pairs}``
    (``pairs`` when the design is ``"paired"``); tasks with no episode on a side are left out.
    Returns ``{tasks, difference (the mean of the raw task differences), ci95, ci_method,
    significant, designs: {paired: n, unpaired: n}}``, or ``None`` when no task is usable.
    """
    usable = [r for r in task_rows if r["n_1"] and r["n_2"] and (r["design"] != "paired" or r.get("pairs"))]
    if not usable:
        return None
    w = 1.0 / len(usable)
    raw = sum(w * _raw_difference(r) for r in usable)
    centre = sum(w * task_difference_estimate(r) for r in usable)
    half = z * math.sqrt(sum(w * w * task_difference_variance(r) for r in usable))
    low, high = max(-1.0, centre - half), min(1.0, centre + half)
    designs: dict[str, int] = {}
    for r in usable:
        designs[r["design"]] = designs.get(r["design"], 0) + 1
    return {
        "tasks": len(usable),
        "difference": raw,
        "ci95": [low, high],
        "ci_method": DIFFERENCE_METHOD,
        "significant": low > 0 or high < 0,
        "designs": designs,
    }
