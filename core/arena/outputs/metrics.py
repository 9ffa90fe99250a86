"""Episode metrics: partial credit beside the binary success signal.

Success rate alone hides how close a policy came: PushT's T-block coverage (gym-pusht's
``info["coverage"]``), ManiSkill's ``is_grasped`` or ``obj_to_goal_dist``. An environment
declares such ``info`` keys with a reduction (:attr:`arena.envs.base.Environment.episode_metrics`,
or :meth:`~arena.envs.base.Environment.episode_metrics_for` when it depends on the config);
the rollout reduces each over an episode's steps (:class:`EpisodeMetrics`) into the episode
record's ``metrics`` (``{key: float}``), and :func:`summarize_metrics` gives a run's mean of each
with a 95 % interval for ``run_result.json``, ``experiment_result.json``, the report and the
console summary.

Reductions (:data:`REDUCTIONS`): ``max`` (the best the episode reached, what ``lerobot-eval``
reports for PushT as ``max_reward``), ``min``, ``last`` (the value when the episode ended),
``mean`` (over the episode's steps). Booleans count as 0/1, so ``is_grasped`` under ``max`` is
"grasped at some point". A step whose ``info`` lacks a declared key, or holds a non-finite
value, adds nothing for that key; an episode with no value for a key has none in its record.

The interval is Student's t interval of the mean over the run's counted episodes (success,
failure, timeout; infrastructure errors are excluded as from the success rate), with the
two-sided 97.5 % quantiles of t tabulated below (Student 1908; values as in any t table) —
the normal approximation is too narrow at the 10–50 episodes arena runs usually have. With
one episode there is no interval (``ci_low``/``ci_high`` are ``None``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

Reduction = Literal["max", "min", "last", "mean"]
#: The reductions an environment may declare for an episode metric.
REDUCTIONS: tuple[str, ...] = ("max", "min", "last", "mean")

# Two-sided 95 % (one-sided 0.975) quantiles of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
# Beyond 30: quantiles at 40, 60, 120 degrees of freedom, then the normal's.
_T975_TAIL = ((40, 2.0211), (60, 2.0003), (120, 1.9799))
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table lookup;
    between tabulated values beyond 30 the quantile is interpolated in ``1/df``, exact to
    about 1e-4).

    Raises:
        ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    points = [(30, _T975[-1]), *_T975_TAIL, (math.inf, _Z975)]
    for (d0, q0), (d1, q1) in zip(points, points[1:]):
        if df <= d1:
            x0, x1, x = 1 / d0, (0.0 if math.isinf(d1) else 1 / d1), 1 / df
            return q0 + (q1 - q0) * (x0 - x) / (x0 - x1)
    return _Z975  # pragma: no cover - the last point is infinite


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


class EpisodeMetrics:
    """The running reduction of one episode's declared metrics.

    ``declared``: ``{info key: reduction}`` (checked by :func:`check_declaration`). Feed each
    step with :meth:`add`, read the episode's values with :meth:`result`.
    """

    __slots__ = ("declared", "_value", "_count")

    def __init__(self, declared: Mapping[str, str]) -> None:
        self.declared = dict(declared)
        self._value: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def add(self, key: str, value: float) -> None:
        """Add one step's ``value`` of ``key`` (ignored when not finite or not declared)."""
        reduction = self.declared.get(key)
        if reduction is None or not math.isfinite(value):
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
        self._count[key] = count + 1

    def result(self) -> dict[str, float]:
        """``{key: value}`` for each declared key the episode saw (declaration order)."""
        return {key: self._value[key] for key in self.declared if key in self._value}


def step_values(info: Any, declared: Mapping[str, str], num_envs: int) -> dict[str, np.ndarray]:
    """``{key: float64 (num_envs,)}`` of the declared keys a step's ``info`` holds with one value
    per env (others are left out: a batch-wide value is not a per-env metric)."""
    if not declared or not isinstance(info, dict):
        return {}
    out: dict[str, np.ndarray] = {}
    for key in declared:
        if key not in info:
            continue
        try:
            values = np.asarray(info[key], dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            continue
        if values.shape == (num_envs,):
            out[key] = values
    return out


def summarize_metrics(records: Iterable[Any]) -> dict[str, dict[str, Any]] | None:
    """A run's episode metrics: ``{key: {"mean", "ci_low", "ci_high", "episodes"}}``.

    ``records``: :class:`arena.outputs.records.EpisodeRecord` objects (or dicts); error episodes
    and records without ``metrics`` are skipped. ``mean`` is over the episodes that have the
    key; the interval is Student's t (module docstring), ``None`` with fewer than two episodes.
    Returns ``None`` when no counted episode has a metric.
    """
    values: dict[str, list[float]] = {}
    for record in records:
        outcome = record.get("outcome") if isinstance(record, dict) else getattr(record, "outcome", None)
        metrics = record.get("metrics") if isinstance(record, dict) else getattr(record, "metrics", None)
        if outcome == "error" or not isinstance(metrics, dict):
            continue
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and math.isfinite(value):  # bools count as 0/1
                values.setdefault(str(key), []).append(float(value))
    if not values:
        return None
    out: dict[str, dict[str, Any]] = {}
    for key, xs in values.items():
        n = len(xs)
        mean = math.fsum(xs) / n
        low = high = None
        if n >= 2:
            sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
            half = t_quantile_975(n - 1) * sd / math.sqrt(n)
            low, high = mean - half, mean + half
        out[key] = {"mean": mean, "ci_low": low, "ci_high": high, "episodes": n}
    return out
