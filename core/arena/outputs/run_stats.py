"""The statistics a run's records carry (``run_result.json``): its success rate and the Wilson
interval around it (stdlib only). Differences between runs are
:mod:`arena.results.difference_stats`; a suite's rates :mod:`arena.results.suite_stats`.

- :func:`wilson_interval`: the Wilson score interval of one binomial proportion ``k/n``;
  it stays inside ``[0, 1]`` and covers well at small ``n`` and near 0 % / 100 %
  (Wilson 1927, "Probable inference, the law of succession, and statistical inference").
- :func:`success_rate`: ``k/n`` over non-error episodes.
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


def success_rate(k: int, n: int) -> float | None:
    """``k / n``, or ``None`` when there are no (non-error) episodes."""
    return k / n if n else None
