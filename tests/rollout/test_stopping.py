"""The betting confidence sequence and the seed-order stopping rule (arena.outputs.stopping)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.outputs.run_stats import wilson_interval
from arena.outputs.stopping import (
    TRUNCATION,
    BettingConfidenceSequence,
    SeedOrderStop,
    simulate_stopping,
)


def _hedged_capital_by_hand(xs: list[int], m: float, alpha: float = 0.05) -> float:
    """Waudby-Smith & Ramdas 2023, eqs. 24-27, written out as a plain loop (independent of the
    vectorized code): hedged capital max(K+, K-)/2 with predictable plug-in bets."""
    k_plus = k_minus = 1.0
    total = squares = 0.0
    mu, var = 0.5, 0.25
    for t, x in enumerate(xs, start=1):
        lam = math.sqrt(2 * math.log(2 / alpha) / (var * t * math.log(1 + t)))
        k_plus *= 1 + min(lam, TRUNCATION / m) * (x - m)
        k_minus *= 1 - min(lam, TRUNCATION / (1 - m)) * (x - m)
        squares += (x - mu) ** 2
        total += x
        mu, var = (0.5 + total) / (t + 1), (0.25 + squares) / (t + 1)
    return max(k_plus, k_minus) / 2


@pytest.mark.parametrize("m", [0.1, 0.5, 0.73, 0.95])
def test_capital_matches_the_paper_written_out(m):
    xs = [1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1] * 3
    cs = BettingConfidenceSequence(0.05, grid=np.array([m]))
    for x in xs:
        cs.update(x)
    assert math.exp(float(cs.capital_at(m))) == pytest.approx(_hedged_capital_by_hand(xs, m), rel=1e-9)


@pytest.mark.parametrize("p", [0.05, 0.5, 0.8, 0.97])
def test_coverage_holds_at_every_episode_count_at_once(p):
    # Time-uniform coverage: the fraction of 3000 sequences (500 episodes each) whose capital at
    # the true rate EVER reaches 1/alpha, i.e. that optional stopping at any time could catch
    # outside the sequence, is at most alpha = 5 % (within 3 simulation standard errors).
    reps, horizon = 3000, 500
    rng = np.random.default_rng(7)
    x = rng.random((reps, horizon)) < p
    cs = BettingConfidenceSequence(0.05, batch=(reps,), grid=np.array([p]))
    ever = np.zeros(reps, dtype=bool)
    for t in range(horizon):
        cs.update(x[:, t])
        ever |= cs.capital_at(p) >= cs.log_threshold
    assert ever.mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_a_fixed_n_interval_at_a_stopping_time_under_covers_and_the_sequence_does_not():
    # Stop the first time the Wilson interval excludes 0.5 (a "peeking" rule) with a fair coin:
    # Wilson then never covers 0.5, while the sequence still does in >= 95 % of runs.
    rng = np.random.default_rng(3)
    reps, horizon = 400, 300
    x = rng.random((reps, horizon)) < 0.5
    cs = BettingConfidenceSequence(0.05, batch=(reps,))
    peeked = np.zeros(reps, dtype=bool)
    covered_at_stop = np.ones(reps, dtype=bool)
    k = np.zeros(reps, dtype=int)
    for t in range(horizon):
        cs.update(x[:, t])
        k += x[:, t]
        for i in np.flatnonzero(~peeked):
            low, high = wilson_interval(int(k[i]), t + 1)
            if low > 0.5 or high < 0.5:
                peeked[i] = True
                covered_at_stop[i] = cs.low[i] <= 0.5 <= cs.high[i]
    assert peeked.mean() > 0.25  # peeking "finds" a difference in many runs of a fair coin
    assert covered_at_stop.mean() >= 0.95


@settings(max_examples=150, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=80))
def test_the_sequence_is_nested_inside_unit_interval_and_honest_at_the_edges(xs):
    cs = BettingConfidenceSequence(0.05)
    previous = (0.0, 1.0)
    for x in xs:
        cs.update(float(x))
        low, high = float(cs.low), float(cs.high)
        assert 0.0 <= low <= high <= 1.0
        assert previous[0] <= low and high <= previous[1]  # the running intersection only narrows
        previous = (low, high)
    if all(xs):
        assert float(cs.high) == 1.0
    if not any(xs):
        assert float(cs.low) == 0.0


def test_one_episode_says_almost_nothing():
    for x in (0, 1):
        cs = BettingConfidenceSequence(0.05)
        cs.update(x)
        assert float(cs.high) - float(cs.low) > 0.9


def _records(outcomes):
    return dict(enumerate(outcomes))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["success", "failure", "timeout"]), min_size=5, max_size=60), st.randoms())
def test_the_decision_does_not_depend_on_the_order_episodes_finish_in(outcomes, rnd: random.Random):
    rule = {"half_width": 0.3, "threshold": 0.6}
    in_order = SeedOrderStop(rule, range(len(outcomes)))
    in_order.feed(_records(outcomes))
    arrival = list(range(len(outcomes)))
    rnd.shuffle(arrival)
    shuffled = SeedOrderStop(rule, range(len(outcomes)))
    seen: dict[int, str] = {}
    for index in arrival:  # episodes finishing in any order, as num_envs and workers make them
        seen[index] = outcomes[index]
        shuffled.feed(seen)
    a, b = in_order.decision, shuffled.decision
    assert (a is None) == (b is None)
    if a is not None:
        assert (a.episodes, a.kind, a.sequence_ci, a.successes) == (b.episodes, b.kind, b.sequence_ci, b.successes)


def test_an_error_episode_is_skipped_a_missing_one_holds_and_min_episodes_is_kept():
    rule = {"threshold": 0.5}
    fault_free = SeedOrderStop(rule, range(29)).feed({i: "failure" for i in range(29)})
    stop = SeedOrderStop(rule, range(30))
    decision = stop.feed({0: "failure", 1: "error", **{i: "failure" for i in range(2, 30)}})
    # the error is excluded, not a hold: the same decision on the counted episodes, one index later
    assert decision is not None and decision.errors == [1] and decision.counted == fault_free.episodes
    assert (decision.kind, decision.sequence_ci, decision.successes) == (
        fault_free.kind, fault_free.sequence_ci, fault_free.successes)
    assert decision.episodes == fault_free.episodes + 1 and decision.to_dict()["error_episodes"] == [1]
    waiting = SeedOrderStop(rule, range(30))
    assert waiting.feed({0: "failure", **{i: "failure" for i in range(2, 30)}}) is None  # 1 still to run
    assert waiting.next == 1
    stop = SeedOrderStop({"threshold": 0.5, "min_episodes": 20}, range(30))
    decision = stop.feed({i: "failure" for i in range(30)})
    assert decision.episodes == 20 and decision.kind == "below"
    assert decision.excluded == list(range(20, 30)) and "below 50.0%" in decision.reason
    assert decision.to_dict()["sequence_method"] == "betting-confidence-sequence"


def test_early_stopping_saves_most_episodes_of_a_good_policy_against_a_threshold():
    # docs/statistics.md's case: a 0.95-rate policy against a 0.80 threshold with 200 episodes planned
    small = simulate_stopping(0.95, {"threshold": 0.8}, 200, replicates=300, seed=0)
    assert small == simulate_stopping(0.95, {"threshold": 0.8}, 200, replicates=300, seed=0)  # reproducible
    assert small["decisions"]["above"] > 0.95 and small["decisions"]["below"] == 0.0
    assert 30 < small["mean_episodes"] < 80 and small["saved_fraction"] > 0.6
