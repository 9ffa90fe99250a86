"""Statistics of the difference between two runs' success rates: paired when both runs played
the same episodes, else unpaired. (One run's rate and interval: :mod:`arena.outputs.run_stats`;
a suite's: :mod:`arena.results.suite_stats`.)

Two runs are *paired* when they share the environment, the task, the init states and the seed
of every episode index (:func:`pairing_differences` says where they do not): episode ``i`` of
one run then faces the same situation as episode ``i`` of the other, and the outcome pairs
carry more information than the two rates alone. Paired figures (pure Python, no scipy):

- :func:`mcnemar_exact`: McNemar's exact test, a two-sided binomial test of the discordant
  episodes (McNemar 1947; the exact, conditional form as in Agresti 2002, *Categorical Data
  Analysis*, section 10.1.4).
- :func:`newcombe_paired_difference`: the difference of paired proportions with Newcombe's
  hybrid score interval for paired data (Newcombe 1998, "Improved confidence intervals for the
  difference between binomial proportions based on paired data", *Stat. Med.* 17:2635–2650,
  method 10).

Unpaired figures: :func:`newcombe_difference`, the hybrid score interval of a difference of two
independent proportions built from their two Wilson intervals (Newcombe 1998, *Stat. Med.*
17:873–890, method 10), and :func:`fisher_exact` (Fisher's exact test, two-sided).
:func:`compare_rates` chooses the design and returns every figure with its method name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Iterable

from arena.outputs.run_stats import Z95, wilson_interval

PAIRED = "paired"
UNPAIRED = "unpaired"


def _binom_cdf_half(k: int, n: int) -> float:
    """``P(X <= k)`` for ``X ~ Binomial(n, 1/2)`` (exact, integer arithmetic)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


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


def mcnemar_exact(only_1: int, only_2: int) -> float:
    """Two-sided p-value of McNemar's exact test on the discordant episodes.

    ``only_1``: episodes only the first run solved; ``only_2``: only the second. Under equal
    success rates each discordant episode goes either way with probability 1/2, so the p-value
    is ``min(1, 2 P(X <= min(only_1, only_2)))`` with ``X ~ Binomial(only_1 + only_2, 1/2)``
    (McNemar 1947, exact conditional form: Agresti 2002, section 10.1.4). No discordant episode
    gives 1.0. Example: 1 vs 8 discordant gives 0.0391.

    Raises:
        ValueError: a count is negative.
    """
    if only_1 < 0 or only_2 < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_1}, {only_2}")
    n = only_1 + only_2
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * _binom_cdf_half(min(only_1, only_2), n))


def newcombe_paired_difference(
    both: int, only_1: int, only_2: int, neither: int, z: float = Z95
) -> tuple[float, float, float]:
    """Difference ``p1 - p2`` of two paired success rates with Newcombe's paired interval.

    The counts are the 2×2 table of outcome pairs over ``n = both + only_1 + only_2 + neither``
    episodes: ``p1 = (both + only_1) / n``, ``p2 = (both + only_2) / n``. The interval combines
    the two Wilson intervals with the (continuity-corrected) correlation ``phi`` of the pairs
    (Newcombe 1998, *Stat. Med.* 17:2635–2650, method 10; ``phi`` is 0 when a margin is 0).
    Returns ``(diff, low, high)`` as fractions in ``[-1, 1]``. Example (the paper's Table II,
    example (a)): 36, 12, 2, 0 gives ``0.2000 [0.0569, 0.3404]``.

    Raises:
        ValueError: a count is negative or there is no episode.
    """
    counts = (both, only_1, only_2, neither)
    if min(counts) < 0:
        raise ValueError(f"counts of outcome pairs must be >= 0, got {counts}")
    n = sum(counts)
    if n == 0:
        raise ValueError("a paired difference needs at least one episode played by both runs")
    s1, s2 = both + only_1, both + only_2
    p1, p2 = s1 / n, s2 / n
    l1, u1 = wilson_interval(s1, n, z)
    l2, u2 = wilson_interval(s2, n, z)
    margins = s1 * (n - s1) * s2 * (n - s2)
    phi = 0.0
    if margins > 0:
        cross = both * neither - only_1 * only_2
        corrected = max(cross - n / 2, 0.0) if cross > 0 else cross
        phi = corrected / math.sqrt(margins)
    diff = p1 - p2
    d_low = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    d_high = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    low = diff - math.sqrt(max(d_low, 0.0))
    high = diff + math.sqrt(max(d_high, 0.0))
    return diff, max(-1.0, low), min(1.0, high)


def _log_hypergeom(x: int, k1: int, n1: int, k2: int, n2: int) -> float:
    """log P(first group has ``x`` of the ``k1 + k2`` successes), margins fixed."""
    total, successes = n1 + n2, k1 + k2

    def log_comb(a: int, b: int) -> float:
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    return log_comb(n1, x) + log_comb(n2, successes - x) - log_comb(total, successes)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of ``k1/n1`` against ``k2/n2`` (independent).

    Conditional on the margins, sums the hypergeometric probabilities of every table no more
    likely than the observed one (the convention of R's ``fisher.test`` and SciPy's
    ``fisher_exact``; Agresti 2002, section 3.5.1). Example (Fisher's tea tasting, 3/4 vs 1/4):
    0.4857. Either ``n`` being 0 gives 1.0.

    Raises:
        ValueError: a count is out of range.
    """
    for k, n in ((k1, n1), (k2, n2)):
        if n < 0 or k < 0 or k > n:
            raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n1 == 0 or n2 == 0:
        return 1.0
    successes = k1 + k2
    lo, hi = max(0, successes - n2), min(n1, successes)
    logs = [_log_hypergeom(x, k1, n1, k2, n2) for x in range(lo, hi + 1)]
    observed = logs[k1 - lo]
    top = max(logs)
    # relative tolerance as R's fisher.test uses, so ties in probability are counted
    tail = sum(math.exp(v - top) for v in logs if v <= observed + 1e-7)
    return min(1.0, tail / sum(math.exp(v - top) for v in logs))


def pair_outcomes(outcomes_1: dict[int, bool], outcomes_2: dict[int, bool]) -> dict[str, int] | None:
    """The 2×2 table of outcome pairs over the episode indices both runs recorded.

    ``outcomes_*``: episode index -> success (non-error episodes only). Returns ``{episodes,
    both, neither, only_1, only_2}``, or ``None`` when no index is common.
    """
    common = sorted(set(outcomes_1) & set(outcomes_2))
    if not common:
        return None
    return {
        "episodes": len(common),
        "both": sum(outcomes_1[i] and outcomes_2[i] for i in common),
        "neither": sum(not outcomes_1[i] and not outcomes_2[i] for i in common),
        "only_1": sum(outcomes_1[i] and not outcomes_2[i] for i in common),
        "only_2": sum(outcomes_2[i] and not outcomes_1[i] for i in common),
    }


#: Keys of settings and fingerprints that a perturbation changes: what the policy sees or what
#: the simulator executes, never which situation episode ``i`` is (its seed, task and initial
#: state are the nominal run's). Runs differing only in these stay paired, episode by episode.
PERTURBATION_KEYS = ("environment.perturbations", "protocol.perturbations")


def is_perturbation(key: str) -> bool:
    """Whether a setup or fingerprint key (``environment.perturbations.image_noise``,
    ``protocol.perturbations.action_delay``) names a perturbation (:data:`PERTURBATION_KEYS`)."""
    return any(key == k or key.startswith(k + ".") for k in PERTURBATION_KEYS)


def pairing_differences(
    setup_1: Any, setup_2: Any, protocol: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """What keeps two runs from being paired: ``[{key, a, b}]``, empty when they are paired.

    The one place the pairing check is made: the setups' differences
    (:func:`arena.results.setups.setup_differences` over ``environment.*``, ``rollout_limit.*``
    and ``environment_builder.seed``) and the records' fingerprint differences ``protocol``
    (:func:`arena.outputs.fingerprint.fingerprint_differences`), less the perturbations
    (:func:`is_perturbation`): a perturbed run and its nominal one play the same situations, so
    ``arena compare --pair`` and a sweep's attribution both compare them paired.
    ``setup_*``: what :func:`arena.results.setups.run_setup` returns.
    """
    from arena.results.setups import setup_differences

    return [d for d in [*setup_differences(setup_1, setup_2), *protocol] if not is_perturbation(str(d["key"]))]


def compare_rates(
    k1: int, n1: int, k2: int, n2: int, *, pairs: dict[str, int] | None = None, unpaired_because: str | None = None
) -> dict[str, Any]:
    """``rate 1 − rate 2`` with its 95 % interval and test, paired when ``pairs`` is given.

    ``pairs``: :func:`pair_outcomes`' table when the runs are paired (same setup) and share
    episodes; ``unpaired_because``: why they are not (shown to the user). Returns ``design``
    (``"paired"``/``"unpaired"``), ``design_reason``, ``difference``, ``ci95``, ``ci_method``,
    ``p_value``, ``test_method`` and, when paired, ``discordant`` ``[only_1, only_2]`` and
    ``pairs``. A paired comparison is computed on the episodes both played; when either side
    has no (non-error) episode every figure is ``None``.
    """
    if pairs is not None and pairs["episodes"] > 0:
        diff, low, high = newcombe_paired_difference(pairs["both"], pairs["only_1"], pairs["only_2"], pairs["neither"])
        return {
            "design": PAIRED,
            "design_reason": (
                f"same environment, task, init states and seeds per episode: {pairs['episodes']} episode pairs"
            ),
            "difference": diff,
            "ci95": [low, high],
            "ci_method": "newcombe-paired-hybrid-score",
            "p_value": mcnemar_exact(pairs["only_1"], pairs["only_2"]),
            "test_method": "mcnemar-exact",
            "discordant": [pairs["only_1"], pairs["only_2"]],
            "pairs": pairs,
        }
    out: dict[str, Any] = {
        "design": UNPAIRED,
        "design_reason": unpaired_because or "no episode index recorded by both runs",
        "difference": None,
        "ci95": None,
        "ci_method": "newcombe-hybrid-score",
        "p_value": None,
        "test_method": "fisher-exact",
        "discordant": None,
        "pairs": None,
    }
    if n1 and n2:
        diff, low, high = newcombe_difference(k1, n1, k2, n2)
        out.update(difference=diff, ci95=[low, high], p_value=fisher_exact(k1, n1, k2, n2))
    return out


def holm(p_values: Iterable[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of p-values (Holm 1979, *Scand. J. Statist.* 6:65–70).

    Controls the family-wise error rate of the tests shown together; ``None`` (no test) stays
    ``None`` and does not count. The adjusted values are monotone in the raw ones and at most 1.
    Example: ``[0.01, 0.04, 0.03, 0.005]`` gives ``[0.03, 0.06, 0.06, 0.02]`` (as R's
    ``p.adjust(method="holm")``).
    """
    values = list(p_values)
    indexed = sorted((p, i) for i, p in enumerate(values) if p is not None)
    m = len(indexed)
    adjusted: list[float | None] = [None] * len(values)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
