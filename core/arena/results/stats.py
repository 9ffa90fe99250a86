"""Confidence intervals for comparing success rates (stdlib only). The interval of one run's
rate, :func:`~arena.outputs.stats.wilson_interval`, is the records' (:mod:`arena.outputs.stats`).

- :func:`newcombe_difference`: the hybrid score interval of a difference of two independent
  proportions (Newcombe 1998, method 10), built from the two Wilson intervals.
"""

from __future__ import annotations

import math

from arena.outputs.stats import Z95, wilson_interval


def newcombe_difference(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float, float]:
    """Difference ``p1 - p2`` of two success rates with its Newcombe hybrid score interval.

    Returns ``(diff, low, high)`` as fractions in ``[-1, 1]``. Example (Newcombe 1998,
    Table II): 9/10 vs 3/10 gives ``0.60 [0.17, 0.81]``.

    Raises:
        ValueError: ``n1`` or ``n2`` is 0, or a count is out of range.
    """
    if n1 <= 0 or n2 <= 0:
        raise ValueError(f"a difference of rates needs episodes on both sides (n1={n1}, n2={n2})")
    l1, u1 = wilson_interval(k1, n1, z)
    l2, u2 = wilson_interval(k2, n2, z)
    p1, p2 = k1 / n1, k2 / n2
    diff = p1 - p2
    low = diff - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = diff + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return diff, max(-1.0, low), min(1.0, high)

