"""Anytime-valid early stopping of a run: ``rollout_limit.stop_when``.

The statistic is a *confidence sequence* for the run's success rate: a sequence of intervals
``C_1, C_2, …`` that covers the true rate at every episode count at once with probability
``1 - alpha``, so it stays valid when the number of episodes is chosen by looking at the data
(a fixed-n interval such as Wilson's, computed at a data-dependent stopping time, does not).
This module uses the hedged betting confidence sequence with predictable plug-in bets of
Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by betting",
*J. R. Stat. Soc. B* 86(1):1–27 (section 4, Theorem 3 and eqs. 24–27): for each candidate rate
``m`` two gamblers bet for and against ``m`` with bets ``lambda_i`` chosen from episodes
``0…i-1`` only; ``m`` leaves the set once the hedged capital
``max(K+_t(m), K-_t(m)) / 2`` reaches ``1/alpha`` (Ville's inequality). numpy only.

The rule (:class:`SeedOrderStop`) looks at episodes **in seed order**: episode ``i`` is
taken once episodes ``0…i-1`` are recorded. An ``error`` episode (the infrastructure's) is
excluded from the sequence, as from every success rate: the rule skips it and goes on with
the next episode, so one error neither switches the rule off nor changes what it decides on
the counted episodes. An error recorded by an earlier attempt that this attempt runs again
(``arena run --resume`` without ``--keep-errors``) is pending, not skipped, until its new
record arrives. The decision therefore depends only on the outcomes by episode index (errors
where they fell), never on ``num_envs``, ``workers``, the backend, the order episodes finish
in or a resume. It is evaluated inside ``arena run-one``, which has every record of the run in
view; a sharded run (``--shard K/N``, N > 1: its shards in separate processes) and a rule
comparing two runs (separate processes) are refused at validation. Episodes past the stopping
index that were already running are kept in ``episodes.jsonl`` but excluded from every
figure (``run_result.json``'s ``stop.excluded_episodes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

METHOD = "betting-confidence-sequence"
#: Bets are truncated at ``TRUNCATION / m`` (resp. ``/(1-m)``): WSR 2023 suggest 1/2 or 3/4.
TRUNCATION = 0.5
#: Candidate rates the sequence is evaluated on (cell centres of a uniform grid of [0, 1]).
GRID_POINTS = 1000


class BettingConfidenceSequence:
    """The hedged betting confidence sequence for a mean in ``[0, 1]`` (see the module docstring).

    ``alpha``: 1 − the confidence. ``batch``: the shape of independent sequences updated
    together (``()``: one; ``(R,)``: R sequences, for simulation). ``grid``: candidate means,
    shape ``(G,)``. After each :meth:`update` :attr:`low` and :attr:`high` (shape ``batch``)
    hold the running intersection of the sets ``{m : capital < 1/alpha}``, widened by one
    grid step (so a grid never makes it narrower than the continuous set); ``grid_points``
    sets the uniform grid's size when ``grid`` is not given (coarser: faster, a little wider). ``t`` counts the
    observations.
    """

    def __init__(
        self, alpha: float = 0.05, *, batch: tuple[int, ...] = (), grid: np.ndarray | None = None,
        grid_points: int = GRID_POINTS,
    ) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.alpha = float(alpha)
        self.grid = (np.arange(grid_points) + 0.5) / grid_points if grid is None else np.asarray(grid, dtype=np.float64)
        self.step = 1.0 / len(self.grid) if grid is None else 0.0
        self.batch = tuple(batch)
        shape = (*self.batch, len(self.grid))
        self.log_plus = np.zeros(shape)
        self.log_minus = np.zeros(shape)
        self.t = 0
        self.total = np.zeros((*self.batch, 1))  # sum of x
        self.squares = np.zeros((*self.batch, 1))  # sum of (x_i - mu_hat_i)^2
        self.mu_hat = np.full((*self.batch, 1), 0.5)  # mu_hat_{t}, predictable for step t+1
        self.var_hat = np.full((*self.batch, 1), 0.25)
        self.low = np.zeros(self.batch)
        self.high = np.ones(self.batch)
        self.log_threshold = math.log(1.0 / self.alpha)

    def bets(self) -> np.ndarray:
        """``|lambda_{t+1}|`` before truncation (WSR 2023 eq. 26), shape ``batch + (1,)``."""
        t = self.t + 1
        return np.sqrt(2.0 * math.log(2.0 / self.alpha) / (self.var_hat * t * math.log(1.0 + t)))

    def update(self, x: Any) -> None:
        """Add one observation per sequence: ``x`` in ``[0, 1]``, shape ``batch`` (or a scalar)."""
        x = np.asarray(x, dtype=np.float64).reshape((*self.batch, 1))
        lam = self.bets()
        m = self.grid
        lam_plus = np.minimum(lam, TRUNCATION / m)
        lam_minus = np.minimum(lam, TRUNCATION / (1.0 - m))
        self.log_plus += np.log1p(lam_plus * (x - m))
        self.log_minus += np.log1p(-lam_minus * (x - m))
        self.t += 1
        self.total += x
        self.squares += (x - self.mu_hat) ** 2
        self.mu_hat = (0.5 + self.total) / (self.t + 1)
        self.var_hat = (0.25 + self.squares) / (self.t + 1)
        hedged = np.maximum(self.log_plus, self.log_minus) + math.log(0.5)
        inside = hedged < self.log_threshold
        any_inside = inside.any(axis=-1)
        first = np.argmax(inside, axis=-1)
        last = len(m) - 1 - np.argmax(inside[..., ::-1], axis=-1)
        low = np.where(any_inside, np.maximum(m[first] - self.step, 0.0), 1.0)
        high = np.where(any_inside, np.minimum(m[last] + self.step, 1.0), 0.0)
        self.low = np.maximum(self.low, low)
        self.high = np.minimum(self.high, high)

    def capital_at(self, m: float) -> np.ndarray:
        """The hedged log-capital at the grid point nearest ``m`` (shape ``batch``)."""
        j = int(np.argmin(np.abs(self.grid - m)))
        return np.maximum(self.log_plus[..., j], self.log_minus[..., j]) + math.log(0.5)


@dataclass
class StopDecision:
    """Why and where a run stopped: after the episodes with indices ``0…episodes-1``, of which
    ``counted`` entered the sequence and ``errors`` (indices) were error episodes it skipped."""

    rule: dict[str, Any]
    kind: str  # "half_width", "above" or "below"
    episodes: int
    successes: int
    sequence_ci: tuple[float, float]
    confidence: float
    reason: str
    excluded: list[int] = field(default_factory=list)
    counted: int | None = None
    errors: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``stop`` entry of ``run_result.json``: ``episodes_used`` is the number of episode
        indices the decision covers (errors among them included), ``episodes_counted`` those of
        them in the sequence, ``error_episodes`` the error episodes among them (excluded)."""
        return {
            "rule": self.rule,
            "decision": self.kind,
            "reason": self.reason,
            "episodes_used": self.episodes,
            "episodes_counted": self.episodes if self.counted is None else self.counted,
            "error_episodes": sorted(self.errors),
            "successes": self.successes,
            "sequence_ci": list(self.sequence_ci),
            "sequence_confidence": self.confidence,
            "sequence_method": METHOD,
            "excluded_episodes": sorted(self.excluded),
        }


def rule_dict(rule: Any) -> dict[str, Any]:
    """The rule's set fields (a ``StopWhenConfig`` or a mapping)."""
    data = rule.model_dump() if hasattr(rule, "model_dump") else dict(rule)
    return {k: v for k, v in data.items() if v is not None}


def _met(rule: Mapping[str, Any], low: float, high: float) -> str | None:
    if rule.get("half_width") is not None and (high - low) / 2 <= rule["half_width"]:
        return "half_width"
    threshold = rule.get("threshold")
    if threshold is not None:
        if low > threshold:
            return "above"
        if high < threshold:
            return "below"
    return None


class SeedOrderStop:
    """Evaluates a run's ``stop_when`` over its episodes in seed (episode index) order.

    ``rule``: ``{half_width, threshold, confidence, min_episodes}`` (a ``StopWhenConfig``);
    ``indices``: the run's work-item indices. Feed it the run's merged records by index
    (:meth:`feed`, as often as they change); :attr:`decision` is set once the rule is met.

    ``decided``: the ``stop`` an earlier attempt recorded (:meth:`StopDecision.to_dict`). The
    decision is then kept, not reopened: the rule is not evaluated again, and once every
    episode before its ``episodes_used`` is taken the decision is that one, its figures
    (successes, episodes counted, errors, the sequence's interval) those of the records now.
    So a resume may run a stopped run's error episodes again (their new records count) without
    running any episode past the stop, whatever the rule would say on the new records. The
    interval stays valid: a confidence sequence covers at every episode count at once.
    """

    def __init__(self, rule: Any, indices: Iterable[int], decided: Mapping[str, Any] | None = None) -> None:
        self.rule = rule_dict(rule)
        self.confidence = float(self.rule.get("confidence", 0.95))
        self.min_episodes = int(self.rule.get("min_episodes", 1) or 1)
        self.indices = sorted(indices)
        self.sequence = BettingConfidenceSequence(1.0 - self.confidence)
        self.next = 0  # position in self.indices of the first episode not yet taken
        self.counted = 0  # episodes in the sequence (taken, not errors)
        self.errors: list[int] = []  # error episodes taken and skipped
        self.successes = 0
        self.decision: StopDecision | None = None
        self.decided = dict(decided) if decided is not None else None

    def feed(self, outcomes: Mapping[int, Any]) -> StopDecision | None:
        """Take every episode that has become next in seed order; return the decision.

        ``outcomes``: episode index -> its record (``.outcome``) or outcome string; leave out
        an episode that is still to run (a missing index holds the sequence). Error episodes
        are skipped: never counted, they do not hold the sequence either.
        """
        while self.decision is None and self.next < len(self.indices):
            index = self.indices[self.next]
            if self.decided is not None and index >= int(self.decided["episodes_used"]):
                break
            entry = outcomes.get(index)
            outcome = getattr(entry, "outcome", entry)
            if outcome is None:
                break
            self.next += 1
            if outcome == "error":
                self.errors.append(index)
                continue
            success = outcome == "success"
            self.sequence.update(1.0 if success else 0.0)
            self.successes += success
            self.counted += 1
            if self.counted < self.min_episodes or self.decided is not None:
                continue
            low, high = float(self.sequence.low), float(self.sequence.high)
            kind = _met(self.rule, low, high)
            if kind is not None:
                self.decision = StopDecision(
                    rule=self.rule, kind=kind, episodes=self.next, successes=self.successes,
                    sequence_ci=(low, high), confidence=self.confidence,
                    reason=_reason(kind, self.rule, self.counted, low, high, self.confidence),
                    counted=self.counted, errors=list(self.errors),
                )
        if self.decision is None and self.decided is not None:
            if self.next >= len(self.indices) or self.indices[self.next] >= int(self.decided["episodes_used"]):
                self.decision = self._kept()
        if self.decision is not None:
            self.decision.excluded = [i for i in outcomes if i >= self.decision.episodes]
        return self.decision

    def _kept(self) -> StopDecision:
        """The earlier decision (``decided``) with the figures of the records taken now; its
        reason says which of its error episodes were run again and now count."""
        decided = self.decided or {}
        low, high = float(self.sequence.low), float(self.sequence.high)
        rerun = sorted(set(decided.get("error_episodes") or ()) - set(self.errors))
        reason = str(decided.get("reason") or "")
        if rerun:
            reason += (f"; error episode(s) {', '.join(map(str, rerun))} were run again after the stop (the decision kept): "
                       f"its {self.confidence:.0%} confidence sequence is now [{100 * low:.1f}%, {100 * high:.1f}%] "
                       f"after {self.counted} episode(s)")
        return StopDecision(
            rule=self.rule, kind=str(decided.get("decision")), episodes=int(decided["episodes_used"]),
            successes=self.successes, sequence_ci=(low, high), confidence=self.confidence, reason=reason,
            counted=self.counted, errors=list(self.errors),
        )

    def reason(self) -> str | None:
        """The decision's reason, or ``None`` while the run goes on (the rollout polls this)."""
        return self.decision.reason if self.decision is not None else None


def _reason(kind: str, rule: Mapping[str, Any], n: int, low: float, high: float, confidence: float) -> str:
    cs = f"its {confidence:.0%} confidence sequence [{100 * low:.1f}%, {100 * high:.1f}%] after {n} episode(s)"
    if kind == "half_width":
        return f"stop_when.half_width={rule['half_width']}: {cs} is at most ±{100 * rule['half_width']:.1f} points wide"
    side = "above" if kind == "above" else "below"
    return f"stop_when.threshold={rule['threshold']}: {cs} lies {side} {100 * rule['threshold']:.1f}%"


def _met_batch(rule: Mapping[str, Any], low: np.ndarray, high: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """:func:`_met` for arrays, in the same order of precedence."""
    out = []
    if rule.get("half_width") is not None:
        out.append(("half_width", (high - low) / 2 <= rule["half_width"]))
    if rule.get("threshold") is not None:
        out.append(("above", low > rule["threshold"]))
        out.append(("below", high < rule["threshold"]))
    return out


def simulate_stopping(
    rate: float, rule: Mapping[str, Any], max_episodes: int, *, replicates: int = 2000, seed: int = 0,
    grid_points: int = GRID_POINTS,
) -> dict[str, Any]:
    """Stopping under ``rule`` of runs with a true success ``rate`` and ``max_episodes`` planned.

    Simulates ``replicates`` runs (numpy, ``default_rng(seed)``: reproducible) and returns
    ``grid_points`` below the runs' :data:`GRID_POINTS` trades a slightly later stop for speed.
    Returns ``{rate, max_episodes, replicates, seed, rule, grid_points, mean_episodes, median_episodes,
    p90_episodes, stopped (fraction stopped by the rule), decisions {above, below, half_width,
    none} (fractions), saved_fraction (1 - mean_episodes / max_episodes)}``.
    """
    rng = np.random.default_rng(seed)
    rule = dict(rule)
    confidence = float(rule.get("confidence", 0.95))
    minimum = int(rule.get("min_episodes", 1) or 1)
    cs = BettingConfidenceSequence(1.0 - confidence, batch=(replicates,), grid_points=grid_points)
    outcomes = rng.random((replicates, max_episodes)) < rate
    used = np.full(replicates, max_episodes)
    kinds = np.full(replicates, "none", dtype=object)
    open_ = np.ones(replicates, dtype=bool)
    for t in range(max_episodes):
        cs.update(outcomes[:, t])
        if t + 1 < minimum:
            continue
        for kind, met in _met_batch(rule, cs.low, cs.high):
            now = open_ & met
            used[now], kinds[now], open_[now] = t + 1, kind, False
        if not open_.any():
            break
    mean = float(used.mean())
    return {
        "rate": rate,
        "max_episodes": max_episodes,
        "replicates": replicates,
        "seed": seed,
        "rule": rule,
        "grid_points": grid_points,
        "mean_episodes": mean,
        "median_episodes": float(np.median(used)),
        "p90_episodes": float(np.percentile(used, 90)),
        "stopped": float((kinds != "none").mean()),
        "decisions": {k: float((kinds == k).mean()) for k in ("above", "below", "half_width", "none")},
        "saved_fraction": 1.0 - mean / max_episodes,
    }


def make_stopper(
    limit: Any, items: Iterable[Any], merged: Mapping[int, Any], pending: Iterable[int] = (),
    decided: Mapping[str, Any] | None = None,
) -> SeedOrderStop | None:
    """The run's :class:`SeedOrderStop` (``None`` without ``limit.stop_when``), fed with the
    records a resume found (``merged``: episode index -> record) except those of ``pending``
    (error episodes this attempt runs again: the rule waits for their new records);
    ``decided``: the ``stop`` an earlier attempt recorded, kept (see :class:`SeedOrderStop`)."""
    rule = getattr(limit, "stop_when", None)
    if rule is None:
        return None
    skip = set(pending)
    stopper = SeedOrderStop(rule, [item.episode_index for item in items], decided)
    stopper.feed({i: r for i, r in merged.items() if i not in skip})
    return stopper


def stop_record(stopper: SeedOrderStop | None, merged: Mapping[int, Any]) -> dict[str, Any] | None:
    """``run_result.json``'s ``stop`` (:meth:`StopDecision.to_dict`), or ``None`` when the run
    was not stopped by its rule."""
    if stopper is None:
        return None
    decision = stopper.feed(merged)
    return decision.to_dict() if decision is not None else None
