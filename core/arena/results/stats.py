"""Confidence intervals for success rates (stdlib only).

- :func:`wilson_interval`: the Wilson score interval of one binomial proportion ``k/n``;
  it stays inside ``[0, 1]`` and covers well at small ``n`` and near 0 % / 100 %.
- :func:`newcombe_difference`: the hybrid score interval of a difference of two independent
  proportions (Newcombe 1998, method 10), built from the two Wilson intervals.
"""

from __future__ import annotations

import math

#: Two-sided 95 % normal quantile.
Z95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials, as fractions in ``[0, 1]``.

    ``n == 0`` gives ``(0.0, 1.0)`` (nothing is known).

    Raises:
        ValueError: ``n < 0``, ``k < 0`` or ``k > n``.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return low, high


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


def success_rate(k: int, n: int) -> float | None:
    """``k / n``, or ``None`` when there are no (non-error) episodes."""
    return k / n if n else None
