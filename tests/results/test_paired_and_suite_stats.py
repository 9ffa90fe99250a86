"""Paired comparisons, Holm, suite aggregates: published worked examples, edge cases, coverage.

Coverage is measured by simulation with fixed seeds (a few thousand replicates, seconds).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.results.difference_stats import (
    compare_rates,
    fisher_exact,
    holm,
    mcnemar_exact,
    newcombe_paired_difference,
    pair_outcomes,
)
from arena.results.suite_stats import stratified_wilson, suite_difference, suite_rates


def test_newcombe_paired_matches_newcombe_1998_paired_table_ii():
    # Newcombe 1998, Stat. Med. 17:2635-2650, Table II example (a): 36, 12, 2, 0 (n = 50),
    # method 10: 0.2000 [0.0569, 0.3404]
    diff, low, high = newcombe_paired_difference(36, 12, 2, 0)
    assert (round(diff, 4), round(low, 4), round(high, 4)) == (0.2, 0.0569, 0.3404)


def test_mcnemar_fisher_and_holm_match_published_values():
    # exact McNemar with 1 vs 8 discordant pairs: 2 * P(Bin(9, 1/2) <= 1) = 20/512
    assert mcnemar_exact(1, 8) == pytest.approx(20 / 512)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    # Fisher's tea-tasting table (Fisher 1935; Agresti 2002 Table 3.8): two-sided 0.4857
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(0.4857, abs=1e-4)
    # R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([None, 0.2]) == [None, 0.2]


def test_compare_rates_says_which_design_and_why():
    pairs = pair_outcomes({0: True, 1: True, 2: False}, {0: True, 1: False, 2: False, 3: True})
    assert pairs == {"episodes": 3, "both": 1, "neither": 1, "only_1": 1, "only_2": 0}
    paired = compare_rates(2, 3, 1, 3, pairs=pairs)
    assert paired["design"] == "paired" and paired["test_method"] == "mcnemar-exact"
    assert paired["ci_method"] == "newcombe-paired-hybrid-score" and paired["discordant"] == [1, 0]
    unpaired = compare_rates(9, 10, 3, 10, unpaired_because="seeds differ")
    assert unpaired["design"] == "unpaired" and unpaired["design_reason"] == "seeds differ"
    assert unpaired["ci95"] == pytest.approx([0.1705, 0.8090], abs=1e-3)  # Newcombe 1998 Table II
    assert compare_rates(0, 0, 1, 2)["difference"] is None


tables = st.tuples(*(st.integers(0, 40),) * 4).filter(lambda t: sum(t) > 0)


@settings(max_examples=300, deadline=None)
@given(tables)
def test_paired_interval_contains_the_estimate_and_stays_in_range(t):
    diff, low, high = newcombe_paired_difference(*t)
    assert -1.0 <= low <= diff + 1e-12 and diff - 1e-12 <= high <= 1.0
    swapped = newcombe_paired_difference(t[0], t[2], t[1], t[3])
    assert swapped == pytest.approx((-diff, -high, -low))  # antisymmetric
    assert 0.0 <= mcnemar_exact(t[1], t[2]) <= 1.0


@pytest.mark.parametrize("t", [(1, 0, 0, 0), (0, 0, 0, 1), (0, 1, 0, 0), (0, 0, 1, 0), (5, 0, 0, 0), (0, 7, 0, 0)])
def test_paired_edges_n1_all_success_all_failure(t):
    diff, low, high = newcombe_paired_difference(*t)
    assert low <= diff <= high and high - low > 0.3  # one or few episodes: a wide interval


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.floats(0, 1)), min_size=1, max_size=12))
def test_suite_rates_stay_in_range_for_any_suite(tasks):
    ns = [n for n, _ in tasks]
    ks = [round(n * f) for n, f in tasks]
    rates = suite_rates(ks, ns)
    for name in ("task_averaged", "episode_weighted"):
        r = rates[name]
        assert 0.0 <= r["ci95"][0] <= r["success_rate"] + 1e-12 and r["success_rate"] - 1e-12 <= r["ci95"][1] <= 1.0
    assert rates["episode_weighted"]["success_rate"] == pytest.approx(sum(ks) / sum(ns))


def test_suite_rates_edges_and_equal_tasks():
    all_done = suite_rates([10, 10], [10, 10])["task_averaged"]
    assert all_done["success_rate"] == 1.0 and all_done["ci95"][1] == 1.0 and all_done["ci95"][0] > 0.8
    assert suite_rates([0], [1])["task_averaged"]["ci95"][0] == 0.0
    empty = suite_rates([0, 0], [0, 0])
    assert empty["tasks_without_episodes"] == 2 and empty["task_averaged"]["success_rate"] is None
    # equal n, equal rates: the pooled Wilson interval (anchors.md 5.1: 50/100 -> 40.4-59.6)
    r = suite_rates([25, 25], [50, 50])["task_averaged"]
    assert [round(100 * x, 1) for x in r["ci95"]] == [40.4, 59.6]
    # unequal n: the task average weighs a 2-episode task as much as a 100-episode one, so its
    # interval is wider than the pooled one
    r = suite_rates([90, 1], [100, 2])
    assert r["task_averaged"]["success_rate"] == pytest.approx(0.7)
    widths = {k: r[k]["ci95"][1] - r[k]["ci95"][0] for k in ("task_averaged", "episode_weighted")}
    assert widths["task_averaged"] > 2 * widths["episode_weighted"]


def _coverage_of_suite(ps, ns, weights_kind, reps=3000, seed=0):
    rng = np.random.default_rng(seed)
    ps, ns = np.asarray(ps), np.asarray(ns)
    ks = rng.binomial(ns, ps, size=(reps, len(ps)))
    w = np.full(len(ps), 1 / len(ps)) if weights_kind == "task" else ns / ns.sum()
    truth = float((w * ps).sum())
    hits = 0
    for row in ks:
        _, low, high = stratified_wilson(row.tolist(), ns.tolist(), w.tolist())
        hits += low - 1e-12 <= truth <= high + 1e-12
    return hits / reps


@pytest.mark.parametrize(
    "ps,ns",
    [
        (np.linspace(0.5, 0.99, 10), [50] * 10),  # a LIBERO suite: 10 tasks x 50 episodes
        ([0.95] * 10, [20] * 10),
        (np.linspace(0.1, 0.9, 10), [10, 20, 30, 40, 50] * 2),  # unequal episodes per task
    ],
)
@pytest.mark.parametrize("kind", ["task", "episode"])
def test_suite_interval_coverage_by_simulation(ps, ns, kind):
    # 3000 replicates: simulation standard error ~0.4 points; nominal 95 %
    assert _coverage_of_suite(ps, ns, kind) >= 0.95 - 3 * 0.004


def test_paired_interval_and_mcnemar_by_simulation():
    rng = np.random.default_rng(1)
    n, reps = 40, 3000
    # correlated pairs: a shared latent difficulty per episode
    latent = rng.random((reps, n))
    first = latent < 0.7
    second = np.where(rng.random((reps, n)) < 0.3, rng.random((reps, n)) < 0.8, latent < 0.8)
    truth = 0.7 - 0.8
    cache: dict[tuple, tuple] = {}
    hits = 0
    for a, b in zip(first, second):
        t = (int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum()))
        if t not in cache:
            cache[t] = newcombe_paired_difference(*t)
        hits += cache[t][1] <= truth <= cache[t][2]
    assert hits / reps >= 0.95 - 3 * 0.004
    # McNemar's exact test keeps its level under equal rates
    same = rng.random((reps, n)) < 0.6
    other = np.where(rng.random((reps, n)) < 0.5, same, rng.random((reps, n)) < 0.6)
    rejections = sum(mcnemar_exact(int((x & ~y).sum()), int((~x & y).sum())) < 0.05 for x, y in zip(same, other))
    assert rejections / reps <= 0.05 + 3 * 0.004


def test_suite_difference_uses_per_task_differences_and_covers():
    rows = [{"task": t, "design": "unpaired", "k_1": 5, "n_1": 10, "k_2": 9, "n_2": 10, "pairs": None} for t in "abc"]
    d = suite_difference(rows)
    assert d["difference"] == pytest.approx(0.4) and d["designs"] == {"unpaired": 3} and d["significant"]
    assert suite_difference([{**rows[0], "n_1": 0, "k_1": 0}]) is None
    rng = np.random.default_rng(2)
    pa, pb, n, reps = np.linspace(0.5, 0.95, 10), np.linspace(0.45, 0.99, 10), 50, 2000
    truth = float((pb - pa).mean())
    ka, kb = rng.binomial(n, pa, size=(reps, 10)), rng.binomial(n, pb, size=(reps, 10))
    hits = 0
    for ra, rb in zip(ka, kb):
        rows = [{"design": "unpaired", "k_1": int(x), "n_1": n, "k_2": int(y), "n_2": n, "pairs": None} for x, y in zip(ra, rb)]
        low, high = suite_difference(rows)["ci95"]
        hits += low <= truth <= high
    assert hits / reps >= 0.95 - 3 * 0.005
