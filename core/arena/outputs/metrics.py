"""Episode metrics: partial credit beside the binary success signal.

Success rate alone hides how close a policy came: PushT's T-block coverage (gym-pusht's
``info["coverage"]``), ManiSkill's ``is_grasped`` or ``obj_to_goal_dist``. An environment
declares such ``info`` keys with a reduction (:attr:`arena.envs.base.Environment.episode_metrics`,
or :meth:`~arena.envs.base.Environment.episode_metrics_for` when it depends on the config)
and, where it knows them, their bounds
(:attr:`~arena.envs.base.Environment.episode_metric_bounds` /
:meth:`~arena.envs.base.Environment.episode_metric_bounds_for`: ``{key: (low, high)}``);
the rollout reduces each over an episode's steps (:class:`EpisodeMetrics`) into the episode
record's ``metrics`` (``{key: float | bool}``), and :func:`summarize_metrics` gives a run's mean
of each with a 95 % interval for ``run_result.json``, ``experiment_result.json``, the report,
the result sinks and the console summary.

Reductions (:data:`REDUCTIONS`): ``max`` (the best the episode reached, what ``lerobot-eval``
reports for PushT as ``max_reward``), ``min``, ``last`` (the value when the episode ended),
``mean`` (over the episode's steps). A boolean ``info`` value reduced by ``max``, ``min`` or
``last`` stays a boolean in the record (``is_grasped`` under ``max`` is "grasped at some
point": ``true``); under ``mean`` it is the fraction of steps (a float). A step whose ``info``
lacks a declared key adds nothing for that key; a non-finite step value (NaN, ±inf) adds
nothing either, and the key is listed in the record's ``non_finite`` flags
(:mod:`arena.outputs.records`); an episode with no value for a key has none in its record.

Intervals (each entry of the summary names its ``method``; all 95 %, over the run's counted
episodes: success, failure, timeout — infrastructure errors are excluded as from the success
rate):

- ``wilson`` — a boolean metric (every episode's value a JSON boolean): the Wilson score
  interval of ``k/n``, the interval of the success rate (:func:`arena.outputs.run_stats.wilson_interval`).
- ``betting-bounded-mean`` — a metric with declared bounds ``[low, high]`` (every value inside
  them): the hedged betting confidence interval for the mean of a bounded random variable of
  Waudby-Smith & Ramdas (2023), "Estimating means of bounded random variables by betting",
  *J. R. Stat. Soc. B* 86(1):1–27 (section 4: hedged capital, predictable plug-in bets, here
  tuned to the fixed number of episodes ``n`` as the authors' ``confseq`` package does with
  ``fixed_n``: ``lambda_i = sqrt(2 log(2/alpha) / (n sigma_{i-1}^2))``, truncated at ``1/2``),
  on the values rescaled to ``[0, 1]`` in episode order. Any predictable bets keep it valid;
  these only make it narrow. It is valid for any distribution inside the
  bounds at any ``n`` (no normality assumed), never leaves the bounds and never has zero width
  (five episodes at the upper bound give ``[0.31, 1]`` on ``[0, 1]``); with few episodes it is
  wider than a t interval, which is the price of not assuming normality.
- ``student-t-clipped`` — a metric with only one declared bound (``(low, None)``: latency, a
  control rate, a sum of non-negative rewards; or ``(None, high)``), every value on its side:
  Student's t interval (below) with the end that crosses the bound moved onto it. No interval
  of the mean of a variable bounded on one side only can be valid for every distribution at a
  finite width (Bahadur & Savage 1956, Ann. Math. Stat. 27(4)), so the betting interval has no
  one-sided counterpart and t, which assumes roughly normal episode values, stays; clipping is
  the honest repair of its one impossible part: the true mean lies on the bound's side, so the
  clipped interval contains it exactly when t's does (coverage unchanged), and it no longer
  shows values the quantity cannot take (a negative latency). The clipped end at the bound
  says "the data cannot rule out the bound". With one episode there is no interval.
- ``student-t`` — any other metric: Student's t interval of the mean, its quantile from
  ``scipy.stats.t`` (the normal approximation is too narrow at the 10–50 episodes arena runs
  usually have). With one episode there is no interval (``ci_low``/``ci_high`` are ``None``).

A declared bound that a value breaks is ignored for that run (the interval falls back to plain
``student-t``): the declaration, not the data, is then wrong, and clipping at it would hide that.

Bounds arena knows without the environment (:data:`KNOWN_BOUNDS`): live mode's metrics
(:data:`arena.live.episode_stats.LIVE_METRIC_BOUNDS`); an environment's declaration of the same
key wins. The episode return has no bounds unless the environment declares them under
:data:`RETURN_KEY` (:func:`summarize_returns`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from arena.outputs.run_stats import wilson_interval

Reduction = Literal["max", "min", "last", "mean"]
#: The reductions an environment may declare for an episode metric.
REDUCTIONS: tuple[str, ...] = ("max", "min", "last", "mean")

#: Interval methods of :func:`summarize_metrics` (the ``method`` of each summary entry).
WILSON, BETTING, STUDENT_T = "wilson", "betting-bounded-mean", "student-t"
#: Student's t clipped at a one-sided bound (module docstring).
STUDENT_T_CLIPPED = "student-t-clipped"
#: The key under which an environment declares the bounds of its episode return (the
#: record's ``return``, the sum of the step rewards) in ``episode_metric_bounds``.
RETURN_KEY = "return"
#: ``(low, high)`` of a metric; ``None`` for a side without a bound.
Bounds = tuple[float | None, float | None]
#: Bounds of the metrics arena itself adds to records, whatever the environment: live mode's
#: (:mod:`arena.live.episode_stats`, which checks at import that it lists each of its metrics;
#: kept here so this module imports nothing above it). ``stale_steps <= steps``; delays are
#: ``d >= 0`` (:meth:`arena.live.schedule.DelaySampler.next`; measured ones count elapsed steps);
#: ``(steps - 1) / elapsed_s`` with ``elapsed_s > 0`` and a wall-clock latency are ``>= 0``; an
#: action's age counts steps since its observation, ``>= 0``.
KNOWN_BOUNDS: dict[str, Bounds] = {
    "live_delay_steps": (0.0, None), "live_stale_ratio": (0.0, 1.0), "live_control_hz": (0.0, None),
    "live_age_mean": (0.0, None), "live_age_max": (0.0, None),
    "live_latency_p50_ms": (0.0, None), "live_latency_p95_ms": (0.0, None), "live_latency_p99_ms": (0.0, None),
}
#: Candidate means (of the values rescaled to [0, 1]) the betting interval is evaluated on.
BETTING_GRID = 2000
#: Bets are truncated at ``BETTING_TRUNCATION / m`` (resp. ``/(1-m)``), as WSR 2023 suggest.
BETTING_TRUNCATION = 0.5


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t``).

    Raises:
        ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def betting_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float]:
    """The hedged betting confidence interval (module docstring) of the mean of ``values``, each
    in ``[0, 1]``, taken in the order given; returns ``(low, high)`` inside ``[0, 1]``.

    For each candidate mean ``m`` on a grid of :data:`BETTING_GRID` cell centres, a gambler
    betting that the mean is above ``m`` and one betting it is below start with capital 1
    and stake the predictable bets ``lambda_i`` (WSR 2023, section 4); ``m`` is rejected
    when the hedged capital ``(K+ + K-) / 2`` reaches ``1 / alpha`` (Markov's inequality on a
    nonnegative martingale). The interval spans the candidates not rejected, widened by one
    grid cell.

    Raises:
        ValueError: no values, a value outside ``[0, 1]`` or ``confidence`` not in ``(0, 1)``.
    """
    x = np.asarray(list(values), dtype=np.float64)
    if x.size == 0:
        raise ValueError("a betting interval needs at least one value")
    if not np.all((x >= 0.0) & (x <= 1.0)):
        raise ValueError("betting_interval: every value must be in [0, 1]")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1.0 - confidence
    n = x.size
    grid = (np.arange(BETTING_GRID) + 0.5) / BETTING_GRID
    log_plus = np.zeros(BETTING_GRID)  # log-capital, so thousands of episodes do not overflow
    log_minus = np.zeros(BETTING_GRID)
    mean_hat, var_hat, total, squares = 0.5, 0.25, 0.0, 0.0
    for i, xi in enumerate(x, start=1):
        bet = math.sqrt(2.0 * math.log(2.0 / alpha) / (n * var_hat))
        log_plus += np.log1p(np.minimum(bet, BETTING_TRUNCATION / grid) * (xi - grid))
        log_minus += np.log1p(-np.minimum(bet, BETTING_TRUNCATION / (1.0 - grid)) * (xi - grid))
        total += xi
        squares += (xi - mean_hat) ** 2
        mean_hat = (0.5 + total) / (i + 1)
        var_hat = (0.25 + squares) / (i + 1)
    kept = np.flatnonzero(np.logaddexp(log_plus, log_minus) + math.log(0.5) < math.log(1.0 / alpha))
    cell = 1.0 / BETTING_GRID
    if kept.size == 0:  # cannot happen for values in [0, 1] (the sample mean is never rejected)
        centre = float(x.mean())
        return centre, centre
    return max(0.0, float(grid[kept[0]]) - cell), min(1.0, float(grid[kept[-1]]) + cell)


def check_declaration(metrics: Mapping[str, Any], owner: str) -> dict[str, str]:
    """``metrics`` (an environment's ``{info key: reduction}``) as a plain dict, checked.

    Raises:
        ValueError: a key is not a non-empty string or a reduction is not one of
            :data:`REDUCTIONS` (the message names ``owner``).
    """
    if not isinstance(metrics, Mapping):
        raise ValueError(f"{owner}: episode_metrics must map info keys to reductions, got {type(metrics).__name__}")
    out: dict[str, str] = {}
    for key, reduction in metrics.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{owner}: episode metric names must be non-empty strings, got {key!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(
                f"{owner}: episode metric {key!r} has reduction {reduction!r}; expected one of {', '.join(REDUCTIONS)}"
            )
        out[key] = str(reduction)
    return out


def declared_metrics(env: Any) -> dict[str, str]:
    """The episode metrics ``{info key: reduction}`` an environment instance declares for its
    config, through its class's ``episode_metrics_for`` (an env behind workers,
    :class:`arena.envs.workers.pool.WorkerEnvironment`, answers for the class its workers run).

    Raises:
        ValueError: the declaration is malformed (:func:`check_declaration`).
    """
    cls = getattr(env, "env_cls", None) or type(env)
    declare = getattr(cls, "episode_metrics_for", None)
    config = getattr(env, "config", None)
    if not callable(declare) or config is None:
        return {}
    return check_declaration(declare(config), f"environment {getattr(cls, 'name', '') or cls.__name__}")


def check_bounds(bounds: Mapping[str, Any], owner: str) -> dict[str, Bounds]:
    """``bounds`` (an environment's ``{info key: (low, high)}``) as a plain dict, checked; a
    side without a bound is ``None`` (``(0.0, None)``: non-negative; an infinite side is read
    as ``None``, so the result is plain JSON).

    Raises:
        ValueError: a key is not a non-empty string, or a bound pair is not two numbers or
            ``None`` with at least one finite and ``low < high`` (the message names ``owner``
            and the key).
    """
    if not isinstance(bounds, Mapping):
        raise ValueError(f"{owner}: episode_metric_bounds must map info keys to (low, high), got {type(bounds).__name__}")
    out: dict[str, Bounds] = {}
    for key, pair in bounds.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{owner}: episode metric names must be non-empty strings, got {key!r}")
        try:
            low, high = (None if v is None else float(v) for v in pair)
        except (TypeError, ValueError):
            raise ValueError(f"{owner}: episode metric {key!r} bounds must be (low, high), got {pair!r}") from None
        low = None if low is not None and low == -math.inf else low
        high = None if high is not None and high == math.inf else high
        finite = [v for v in (low, high) if v is not None]
        if not finite or not all(math.isfinite(v) for v in finite) or (len(finite) == 2 and not low < high):
            raise ValueError(
                f"{owner}: episode metric {key!r} bounds must be finite numbers or None (at least one a number) "
                f"with low < high, got {pair!r}"
            )
        out[key] = (low, high)
    return out


def declared_bounds(env_cls: Any, config: Any) -> dict[str, Bounds]:
    """The bounds ``{info key: (low, high)}`` an environment class declares for a run with
    ``config`` (``episode_metric_bounds_for``; an env behind workers answers for the class its
    workers run); ``{}`` when it declares none.

    Raises:
        ValueError: the declaration is malformed (:func:`check_bounds`).
    """
    cls = getattr(env_cls, "env_cls", None) or env_cls
    if not isinstance(cls, type):
        cls = type(cls)
    declare = getattr(cls, "episode_metric_bounds_for", None)
    if not callable(declare) or config is None:
        return {}
    return check_bounds(declare(config), f"environment {getattr(cls, 'name', '') or cls.__name__}")


class EpisodeMetrics:
    """The running reduction of one episode's declared metrics.

    ``declared``: ``{info key: reduction}`` (checked by :func:`check_declaration`). Feed each
    step with :meth:`add`, read the episode's values with :meth:`result` and the keys that saw
    a non-finite value with :attr:`non_finite`.
    """

    __slots__ = ("declared", "_value", "_count", "_boolean", "non_finite")

    def __init__(self, declared: Mapping[str, str]) -> None:
        self.declared = dict(declared)
        self._value: dict[str, float] = {}
        self._count: dict[str, int] = {}
        self._boolean: dict[str, bool] = {}
        #: Declared keys that had a NaN or infinite step value (left out of the reduction).
        self.non_finite: list[str] = []

    def add(self, key: str, value: float | bool) -> None:
        """Add one step's ``value`` of ``key`` (a bool stays one under ``max``/``min``/``last``);
        a non-finite value is left out and the key flagged in :attr:`non_finite`; an undeclared
        key is ignored."""
        reduction = self.declared.get(key)
        if reduction is None:
            return
        boolean = isinstance(value, (bool, np.bool_))
        value = float(value)
        if not math.isfinite(value):
            if key not in self.non_finite:
                self.non_finite.append(key)
            return
        count = self._count.get(key, 0)
        if count == 0:
            self._value[key] = value
        elif reduction == "max":
            self._value[key] = max(self._value[key], value)
        elif reduction == "min":
            self._value[key] = min(self._value[key], value)
        elif reduction == "last":
            self._value[key] = value
        else:  # mean, kept as a running mean
            self._value[key] += (value - self._value[key]) / (count + 1)
        self._boolean[key] = boolean and self._boolean.get(key, True) and reduction != "mean"
        self._count[key] = count + 1

    def result(self) -> dict[str, float | bool]:
        """``{key: value}`` for each declared key the episode saw (declaration order); a key
        whose every step value was a bool, reduced by ``max``/``min``/``last``, is a bool."""
        return {
            key: bool(self._value[key]) if self._boolean.get(key) else self._value[key]
            for key in self.declared
            if key in self._value
        }


def step_values(info: Any, declared: Mapping[str, str], num_envs: int) -> dict[str, np.ndarray]:
    """``{key: (num_envs,)}`` of the declared keys a step's ``info`` holds with one value per
    env, ``bool`` when the environment gave booleans, else ``float64`` (others are left out: a
    batch-wide value is not a per-env metric)."""
    if not declared or not isinstance(info, dict):
        return {}
    out: dict[str, np.ndarray] = {}
    for key in declared:
        if key not in info:
            continue
        try:
            values = np.asarray(info[key])
            values = (values if values.dtype == np.bool_ else values.astype(np.float64)).reshape(-1)
        except (TypeError, ValueError):
            continue
        if values.shape == (num_envs,):
            out[key] = values
    return out


def _metric_values(records: Iterable[Any]) -> dict[str, list[float | bool]]:
    """``{key: [value, ...]}`` of the counted episodes' finite metric values, in record order."""
    values: dict[str, list[float | bool]] = {}
    for record in records:
        outcome = record.get("outcome") if isinstance(record, dict) else getattr(record, "outcome", None)
        metrics = record.get("metrics") if isinstance(record, dict) else getattr(record, "metrics", None)
        if outcome == "error" or not isinstance(metrics, dict):
            continue
        for key, value in metrics.items():
            if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
                values.setdefault(str(key), []).append(value)
    return values


def metric_interval(
    values: list[float | bool], bounds: Bounds | None = None
) -> tuple[float, float | None, float | None, str]:
    """``(mean, ci_low, ci_high, method)`` of one metric's values over a run's episodes, by
    the rules of the module docstring (``wilson`` for booleans, ``betting-bounded-mean`` inside
    two finite ``bounds``, ``student-t-clipped`` on the side of one bound (``(low, None)`` or
    ``(None, high)``), ``student-t`` otherwise; ``None`` ends for t with one value).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("metric_interval needs at least one value")
    n = len(values)
    xs = [float(v) for v in values]
    mean = math.fsum(xs) / n
    if all(isinstance(v, bool) for v in values):
        low, high = wilson_interval(sum(1 for v in values if v), n)
        return mean, low, high, WILSON
    lo, hi = bounds if bounds is not None else (None, None)
    inside = all((lo is None or lo <= x) and (hi is None or x <= hi) for x in xs)
    if lo is not None and hi is not None and inside:
        low, high = betting_interval([(x - lo) / (hi - lo) for x in xs])
        # the interval never excludes the sample mean (float rounding of the grid aside)
        return mean, min(lo + low * (hi - lo), mean), max(lo + high * (hi - lo), mean), BETTING
    clip = (lo is not None or hi is not None) and inside
    method = STUDENT_T_CLIPPED if clip else STUDENT_T
    if n < 2:
        return mean, None, None, method
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile_975(n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if clip:  # the mean lies on the bound's side of it: moving the end there loses no coverage
        low = low if lo is None else max(low, lo)
        high = high if hi is None else min(high, hi)
    return mean, low, high, method


def _as_bounds(pair: Any) -> Bounds:
    """A bound pair read back from JSON (``[low, high]``, ``null`` for a missing side)."""
    low, high = pair
    return (None if low is None else float(low), None if high is None else float(high))


def summarize_metrics(
    records: Iterable[Any], bounds: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]] | None:
    """A run's episode metrics: ``{key: {"mean", "ci_low", "ci_high", "episodes", "method",
    "bounds"}}``.

    ``records``: :class:`arena.outputs.records.EpisodeRecord` objects (or dicts) in episode
    order; error episodes and records without ``metrics`` are skipped. ``bounds``: the
    environment's declared ``{key: (low, high)}`` (:func:`declared_bounds`, or its JSON with
    ``null`` for a missing side; ``None``: none), laid over :data:`KNOWN_BOUNDS`. ``mean`` is
    over the episodes that have the key; the interval and its ``method`` follow the module
    docstring; ``bounds`` is ``[low, high]`` (``None`` for a side without one) or ``None``.
    Returns ``None`` when no counted episode has a metric.
    """
    values = _metric_values(records)
    if not values:
        return None
    known = {**KNOWN_BOUNDS, **{str(k): _as_bounds(v) for k, v in (bounds or {}).items()}}
    out: dict[str, dict[str, Any]] = {}
    for key, xs in values.items():
        mean, low, high, method = metric_interval(xs, known.get(key))
        out[key] = {
            "mean": mean, "ci_low": low, "ci_high": high, "episodes": len(xs), "method": method,
            "bounds": list(known[key]) if key in known else None,
        }
    return out


def summarize_returns(records: Iterable[Any], bounds: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The mean episode return (the records' ``return``) over a run's counted episodes with its
    interval, as :func:`summarize_metrics` gives an episode metric (``{"mean", "ci_low",
    "ci_high", "episodes", "method", "bounds"}``), inside the environment's declared
    ``bounds[RETURN_KEY]`` when it declares them; ``None`` when no episode counts."""
    rows = []
    for record in records:
        outcome = record.get("outcome") if isinstance(record, dict) else getattr(record, "outcome", None)
        value = record.get("return") if isinstance(record, dict) else getattr(record, "return_", None)
        rows.append({"outcome": outcome, "metrics": {RETURN_KEY: value}})
    declared = (bounds or {}).get(RETURN_KEY)
    summary = summarize_metrics(rows, {RETURN_KEY: declared} if declared is not None else None)
    return None if summary is None else summary.get(RETURN_KEY)
