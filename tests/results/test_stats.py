from __future__ import annotations

import pytest

from arena.outputs.run_stats import success_rate, wilson_interval
from arena.results.difference_stats import newcombe_difference

# anchors.md section 5.1 (percent, one decimal)
WILSON_TABLE = [
    (5, 10, 23.7, 76.3),
    (9, 10, 59.6, 98.2),
    (10, 10, 72.2, 100.0),
    (25, 50, 36.6, 63.4),
    (45, 50, 78.6, 95.7),
    (50, 100, 40.4, 59.6),
    (180, 200, 85.1, 93.4),
    (450, 500, 87.1, 92.3),
]


@pytest.mark.parametrize("k,n,low,high", WILSON_TABLE)
def test_wilson_matches_reference_table(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert round(100 * lo, 1) == low and round(100 * hi, 1) == high


def test_wilson_edges_stay_inside_unit_interval():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and 0 < hi < 0.35
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_newcombe_difference_matches_newcombe_1998_table_ii():
    diff, low, high = newcombe_difference(9, 10, 3, 10)
    assert round(diff, 2) == 0.60 and round(low, 2) == 0.17 and round(high, 2) == 0.81
    # Newcombe 1998 Table II, example (a): 56/70 vs 48/80 -> 0.2000 [0.0524, 0.3339]
    diff, low, high = newcombe_difference(56, 70, 48, 80)
    assert (round(diff, 4), round(low, 4), round(high, 4)) == (0.2, 0.0524, 0.3339)


def test_newcombe_is_antisymmetric_and_needs_episodes():
    d, lo, hi = newcombe_difference(9, 10, 3, 10)
    assert newcombe_difference(3, 10, 9, 10) == pytest.approx((-d, -hi, -lo))
    with pytest.raises(ValueError):
        newcombe_difference(1, 0, 1, 2)


def test_success_rate_is_none_without_episodes():
    assert success_rate(0, 0) is None and success_rate(3, 4) == 0.75
