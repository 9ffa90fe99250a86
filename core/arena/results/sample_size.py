"""How many episodes a run needs to resolve a difference of success rates (``arena plan-episodes``).

- :func:`episodes_unpaired`: two independent runs, rates ``baseline`` and ``baseline + detect``,
  a two-sided test at level ``1 - confidence`` with ``power``: the normal-approximation sample
  size of Fleiss, Levin & Paik (2003), *Statistical Methods for Rates and Proportions*, 3rd ed.,
  eq. 4.14 (without continuity correction).
- :func:`episodes_paired`: two runs on the same episodes (same seeds and init states) whose
  outcomes disagree on a fraction ``discordant`` of the episodes: Connor (1987), "Sample size for
  testing differences in proportions for the paired-sample design", *Biometrics* 43:207–211,
  eq. 3.
- :func:`stopping_savings`: what ``rollout_limit.stop_when: {threshold: baseline}`` saves in
  expectation for one run whose true rate is ``baseline + detect``, by simulation with a fixed
  seed (:func:`arena.outputs.stopping.simulate_stopping`).
- :func:`sweep_confidence`: the per-test confidence of a perturbation sweep's Holm-adjusted
  comparisons with nominal (``arena plan-episodes --levels``).
- :func:`detect_warning`: ``arena validate``'s warning when a run declares
  ``rollout_limit.detect`` that its ``num_episodes`` cannot resolve.

Stdlib (``statistics.NormalDist``) and numpy only.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def _check(baseline: float, detect: float, power: float, confidence: float) -> float:
    if not 0 < baseline < 1:
        raise ValueError(f"baseline must be a rate in (0, 1), got {baseline}")
    if not 0 < abs(detect) < 1:
        raise ValueError(f"detect must be a difference in (0, 1), got {detect}")
    if not 0.5 <= power < 1 or not 0.5 < confidence < 1:
        raise ValueError(f"power must be in [0.5, 1) and confidence in (0.5, 1), got {power}, {confidence}")
    other = baseline + detect
    if not 0 < other < 1:
        other = baseline - detect
    if not 0 < other < 1:
        raise ValueError(f"baseline {baseline} ± detect {detect} leaves (0, 1)")
    return other


def episodes_unpaired(baseline: float, detect: float, *, power: float = 0.8, confidence: float = 0.95) -> int:
    """Episodes per run for two independent runs (Fleiss, Levin & Paik 2003, eq. 4.14).

    ``n = (z_{a/2} sqrt(2 pbar qbar) + z_b sqrt(p1 q1 + p2 q2))^2 / detect^2`` with
    ``p1 = baseline``, ``p2 = baseline + detect`` (``baseline - detect`` when that leaves [0, 1]),
    rounded up. Example: 0.6 vs 0.65 at 80 % power, 95 %: 1471 episodes per run; 0.25 vs 0.40: 152.

    Raises:
        ValueError: a rate, difference, power or confidence out of range.
    """
    p1, p2 = baseline, _check(baseline, detect, power, confidence)
    pbar = (p1 + p2) / 2
    za, zb = _z(1 - (1 - confidence) / 2), _z(power)
    n = (za * math.sqrt(2 * pbar * (1 - pbar)) + zb * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p2 - p1) ** 2
    return math.ceil(n - 1e-9)


def episodes_paired(detect: float, discordant: float, *, power: float = 0.8, confidence: float = 0.95) -> int:
    """Episodes per run (= pairs) for two runs on the same episodes (Connor 1987, eq. 3).

    ``discordant``: the expected fraction of episodes only one of the two runs solves (at
    least ``|detect|``). ``n = (z_{a/2} sqrt(psi) + z_b sqrt(psi - detect^2))^2 / detect^2``,
    rounded up. Example: detect 0.05 with 10 % discordant episodes, 80 % power: 312.

    Raises:
        ValueError: ``discordant`` below ``|detect|`` or above 1, or power / confidence out of range.
    """
    if not abs(detect) <= discordant <= 1 or detect == 0:
        raise ValueError(f"discordant ({discordant}) must be in [|detect|, 1] and detect non-zero ({detect})")
    if not 0.5 <= power < 1 or not 0.5 < confidence < 1:
        raise ValueError(f"power must be in [0.5, 1) and confidence in (0.5, 1), got {power}, {confidence}")
    za, zb = _z(1 - (1 - confidence) / 2), _z(power)
    n = (za * math.sqrt(discordant) + zb * math.sqrt(discordant - detect**2)) ** 2 / detect**2
    return math.ceil(n - 1e-9)


def stopping_savings(baseline: float, detect: float, max_episodes: int, *, confidence: float = 0.95,
                     replicates: int = 400, seed: int = 0) -> dict[str, Any]:
    """Expected episodes of one run with ``stop_when: {threshold: baseline}`` whose true rate is
    ``baseline + detect``, capped at ``max_episodes`` (simulated, ``seed`` fixed)."""
    from arena.outputs.stopping import simulate_stopping

    rate = min(max(baseline + detect, 0.0), 1.0)
    return simulate_stopping(rate, {"threshold": baseline, "confidence": confidence}, max_episodes,
                             replicates=replicates, seed=seed, grid_points=200)


def sweep_confidence(confidence: float, levels: int) -> float:
    """The per-test confidence of a perturbation sweep of ``levels`` perturbed levels, each
    compared with nominal and Holm-adjusted over all: Holm's first (smallest) p-value is tested
    at ``(1 - confidence) / levels`` (Bonferroni's level), so planning at it keeps the power of
    each comparison whatever the others show (Holm 1979).

    Raises:
        ValueError: ``levels`` below 1.
    """
    if levels < 1:
        raise ValueError(f"levels must be at least 1, got {levels}")
    return 1 - (1 - confidence) / levels


def plan(baseline: float, detect: float, *, paired: bool = False, discordant: float | None = None,
         power: float = 0.8, confidence: float = 0.95, simulate: bool = True, levels: int | None = None) -> dict[str, Any]:
    """Everything ``arena plan-episodes`` prints: episodes per run for the design, the other
    design's number where it can be computed, and the expected saving of early stopping.

    ``levels``: plan a perturbation sweep (:mod:`arena.config.sweep`) of that many perturbed
    levels, each compared with the nominal run: the tests run at :func:`sweep_confidence`, the
    result's ``sweep`` says the seeds every run of the sweep needs and the episodes in all
    (``(levels + 1) × seeds``); no early-stopping simulation."""
    family = confidence
    if levels is not None:
        confidence = sweep_confidence(confidence, levels)
        simulate = False
    unpaired = episodes_unpaired(baseline, detect, power=power, confidence=confidence)
    out: dict[str, Any] = {
        "baseline": baseline, "detect": detect, "power": power, "confidence": confidence,
        "unpaired_episodes_per_run": unpaired, "unpaired_method": "fleiss-levin-paik-4.14",
        "paired_episodes_per_run": None, "paired_method": "connor-1987", "discordant": discordant,
    }
    if paired:
        if discordant is None:
            raise ValueError("--paired needs --discordant: the fraction of episodes only one run solves")
        out["paired_episodes_per_run"] = episodes_paired(detect, discordant, power=power, confidence=confidence)
    needed = out["paired_episodes_per_run"] if paired else unpaired
    out["episodes_per_run"] = needed
    if levels is not None:
        out["sweep"] = {
            "levels": levels, "runs": levels + 1, "family_confidence": family, "per_test_confidence": confidence,
            "adjustment": "holm (planned at its first step, Bonferroni's level)",
            "seeds_per_run": needed, "episodes_total": needed * (levels + 1),
        }
    if simulate:
        out["early_stopping"] = stopping_savings(baseline, detect, needed, confidence=confidence)
    return out


def detect_warning(num_episodes: int, detect: float, baseline: float = 0.5, *, power: float = 0.8,
                   confidence: float = 0.95) -> str | None:
    """A warning when ``num_episodes`` per run cannot resolve a difference ``detect`` between
    two independent runs at ``baseline`` (default 0.5: the most episodes any baseline needs),
    else ``None``."""
    try:
        needed = episodes_unpaired(baseline, detect, power=power, confidence=confidence)
    except ValueError:
        return None
    if num_episodes >= needed:
        return None
    return (
        f"rollout_limit.detect={detect}: {num_episodes} episode(s) per run cannot resolve a difference of "
        f"{100 * detect:.1f} points (two independent runs at {100 * baseline:.0f}%: {needed} episodes each for "
        f"{power:.0%} power at {confidence:.0%}; paired runs need fewer: arena plan-episodes --paired)"
    )
