"""Per-episode numbers of live execution, for the record's ``policy_extras["live"]`` and ``metrics``.

Terms (docs/live.md uses the same):

- **delay** of a request: the control steps its env executed (from the hold rule) while the
  request was in flight -- simulated: the drawn ``d``; measured: counted on that env's own
  schedule. Simulated, an episode's first request is waited for and not listed; measured, it
  is in flight like any other and listed first (it may include a server's warm-up);
- **stale** step: a step executed from the hold rule, not from a fresh row of the newest chunk;
- **age** of an executed action: the control steps since the observation it was computed from
  (row ``r`` of a chunk requested at step ``t`` runs at ``t + r`` with age ``r``; a held
  leftover or repeated action keeps aging); the null action is computed from no observation
  and has none (``null``).

An episode record in live mode carries (all JSON):

- ``policy_extras.live``: ``mode`` ``clock`` ``hold`` ``execute_horizon``; ``delays`` (control
  steps of each request, in order, as above); ``requests``; ``steps``; ``stale_steps``;
  ``hold_past_chunk`` (``continue_chunk`` steps past the previous chunk's end, its last row
  repeated); ``ages`` (per executed step, in order); ``age`` (``mean``, ``p95``, ``max`` of the
  non-null ages, nearest rank; ``null_steps``: steps without one); ``latency_ms`` (``p50``,
  ``p95``, ``p99``, ``mean``, ``max`` of the requests' wall-clock time, nearest rank);
  ``elapsed_s``;
- ``metrics`` (means with intervals per run, like every episode metric): ``live_stale_ratio``
  (``stale_steps / steps``), ``live_age_mean``, ``live_age_max``, ``live_delay_steps`` (mean
  delay) -- these three not with a fixed simulated delay, which makes them the configuration's
  (every episode alike: an interval of zero width), not a measurement;
  ``live_control_hz`` (measured clock only: ``(steps - 1) / elapsed_s``, ``elapsed_s`` from
  the first step's start to the last's, the effective control rate; a simulated clock runs as
  fast as the simulator and reports none), ``live_latency_p50_ms``, ``live_latency_p95_ms``,
  ``live_latency_p99_ms``.

Each of these metrics has known bounds (:data:`LIVE_METRIC_BOUNDS`), which the run's interval
respects (:mod:`arena.outputs.metrics`): the stale ratio is a fraction of steps, in ``[0, 1]``
(betting interval); a delay or an age in control steps, a control rate and a latency cannot be
negative and have no upper bound (Student's t clipped at 0, so a run of a few episodes does not
report a negative latency).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from arena.outputs.metrics import KNOWN_BOUNDS

#: The record ``metrics`` keys live mode adds, each reduced per episode already.
LIVE_METRICS = (
    "live_delay_steps", "live_stale_ratio", "live_control_hz", "live_age_mean", "live_age_max",
    "live_latency_p50_ms", "live_latency_p95_ms", "live_latency_p99_ms",
)

#: ``{metric: (low, high)}`` of :data:`LIVE_METRICS` (``None``: no bound on that side), from
#: :data:`arena.outputs.metrics.KNOWN_BOUNDS`, where the reasons are; a live metric missing
#: there fails this import.
LIVE_METRIC_BOUNDS: dict[str, tuple[float | None, float | None]] = {key: KNOWN_BOUNDS[key] for key in LIVE_METRICS}


def percentiles(samples: Sequence[float]) -> dict[str, float] | None:
    """``{"p50", "p95", "p99", "mean", "max"}`` (nearest rank) of ``samples``; ``None`` for none."""
    if not samples:
        return None
    ordered = sorted(float(s) for s in samples)
    n = len(ordered)

    def rank(q: float) -> float:
        return round(ordered[min(n - 1, max(0, math.ceil(q * n) - 1))], 3)

    return {"p50": rank(0.5), "p95": rank(0.95), "p99": rank(0.99),
            "mean": round(sum(ordered) / n, 3), "max": round(ordered[-1], 3)}


def ages_summary(ages: Sequence[int | None]) -> dict[str, float | int | None]:
    """``{"mean", "p95", "max", "null_steps"}`` of an episode's per-step ages (``None`` entries
    counted in ``null_steps``; the others ``None`` when every step had none)."""
    known = [a for a in ages if a is not None]
    spread = percentiles(known)
    return {
        "mean": spread["mean"] if spread else None, "p95": spread["p95"] if spread else None,
        "max": spread["max"] if spread else None, "null_steps": len(ages) - len(known),
    }


def episode_live(
    schedule: Any, *, mode: str, clock: str, hold: str, latency_ms: Sequence[float], elapsed_s: float,
    fixed_delay: bool = False,
) -> tuple[dict[str, Any], dict[str, float]]:
    """``(policy_extras["live"], metrics)`` of one episode from its :class:`~arena.live.schedule.EnvSchedule`
    (``fixed_delay``: a simulated delay of one value; its delay and ages are no metrics)."""
    latency = percentiles(latency_ms)
    steps = int(schedule.steps)
    age = ages_summary(schedule.ages)
    extras = {
        "mode": mode, "clock": clock, "hold": hold, "execute_horizon": int(schedule.execute_horizon),
        "delays": [int(d) for d in schedule.delays], "requests": int(schedule.requests), "steps": steps,
        "stale_steps": int(schedule.stale_steps), "hold_past_chunk": int(schedule.hold_past_chunk),
        "ages": [None if a is None else int(a) for a in schedule.ages], "age": age,
        "latency_ms": latency, "elapsed_s": round(float(elapsed_s), 4),
    }
    metrics: dict[str, float] = {"live_stale_ratio": schedule.stale_steps / steps if steps else 0.0}
    if not fixed_delay:
        metrics["live_delay_steps"] = float(sum(schedule.delays) / len(schedule.delays)) if schedule.delays else 0.0
    if age["mean"] is not None and not fixed_delay:
        metrics["live_age_mean"] = float(age["mean"])
        metrics["live_age_max"] = float(age["max"])
    if clock == "measured" and elapsed_s > 0 and steps > 1:
        metrics["live_control_hz"] = (steps - 1) / elapsed_s
    if latency is not None:
        metrics.update({f"live_latency_{q}_ms": latency[q] for q in ("p50", "p95", "p99")})
    return extras, metrics
