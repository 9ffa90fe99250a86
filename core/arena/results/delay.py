"""Success versus delay: the runs of a delay sweep, each compared paired with its ``d = 0`` run.

A sweep is the live runs (``execution.mode: live``, :mod:`arena.live`) of one experiment that
differ only in ``execution.delay`` (e.g. made by ``matrix: {runs: [eval], axes: {delay: {key:
execution.delay.steps, values: [0, 1, 2, 3, 4]}}}``): the same environment setup (so the same
episodes: :mod:`arena.results.setups`), policy label, hold rule, execute horizon and clock.
Each run of a sweep is compared with its nominal run (delay 0) on the seeds both played, with
the paired machinery :func:`arena.results.task_comparisons.compare_runs` gives ``arena compare``
(McNemar's exact test, Newcombe's paired interval), p-values Holm-adjusted within the sweep.
``experiment_result.json`` holds them as ``delay_sweeps``; the report draws each as a table and
a plot (:func:`sweep_svg`).
"""

from __future__ import annotations

from typing import Any

from arena.results.setups import setup_differences
from arena.results.task_comparisons import adjust_holm, compare_runs


def _delay(execution: dict[str, Any]) -> tuple[float, str] | None:
    """``(value for ordering and plotting, label)`` of a run's configured delay."""
    delay = execution.get("delay") or {}
    for unit, suffix in (("steps", ""), ("ms", " ms")):
        value = delay.get(unit)
        if value is None:
            continue
        if isinstance(value, list):
            mean = sum(value) / len(value)
            return float(mean), f"{'/'.join(str(v) for v in value)}{suffix} (mean {mean:g})"
        return float(value), f"{value:g}{suffix}" if isinstance(value, float) else f"{value}{suffix}"
    return 0.0, "0"


def _ages(records: list[Any]) -> tuple[float | None, float | None]:
    """The mean over ``records`` of their episodes' mean and maximum action age (``None``: none has one)."""
    ages = []
    for record in records:
        extras = getattr(record, "policy_extras", None) if not isinstance(record, dict) else record.get("policy_extras")
        age = ((extras or {}).get("live") or {}).get("age") if isinstance(extras, dict) else None
        if isinstance(age, dict) and age.get("mean") is not None:
            ages.append((float(age["mean"]), float(age["max"])))
    if not ages:
        return None, None
    return round(sum(a for a, _ in ages) / len(ages), 3), round(sum(m for _, m in ages) / len(ages), 3)


def delay_sweeps(
    runs: dict[str, dict[str, Any]], snapshot_runs: dict[str, Any], records_of: dict[str, list[Any]],
    setups: dict[str, Any],
) -> list[dict[str, Any]]:
    """The experiment's delay sweeps (module docstring), each ``{task, policy, hold,
    execute_horizon, clock, unit, rows, sync, step_ms}`` (``sync``: the sync baseline, a run of
    the same task, policy label and environment setup that waits for every chunk, ``{run, k, n,
    success_rate, ci95}``, or ``None``; ``step_ms``: one control step in ms when the delay is in
    steps and the environment declares its control rate, so the plot reads in both); a row:
    ``run``, ``delay``, ``delay_label``, ``k``,
    ``n``, ``success_rate``, ``ci95``, ``stale_ratio`` (the run's mean ``live_stale_ratio``),
    ``age_mean`` and ``age_max`` (over the run's records, the mean of their episodes' mean and
    maximum action age, ``policy_extras.live.age``: how old, in control steps, the executed
    actions were; ``None`` without ages) and ``vs_nominal`` (the comparison with the ``d = 0`` run, ``None`` for that run or when
    the sweep has none), Holm-adjusted within the sweep (:func:`arena.results.task_comparisons.adjust_holm`)."""
    groups: dict[tuple, list[tuple[float, str, str]]] = {}
    for name, run in runs.items():
        snap = snapshot_runs.get(name) or {}
        execution = snap.get("execution") if isinstance(snap, dict) else None
        if not isinstance(execution, dict) or execution.get("mode") != "live" or not run.get("n"):
            continue
        delay = _delay(execution)
        unit = "ms" if (execution.get("delay") or {}).get("ms") is not None else "steps"
        key = (run.get("task"), run.get("policy_label"), execution.get("hold"), execution.get("execute_horizon"),
               execution.get("clock"), unit, repr(sorted((setups.get(name) or ("", {}))[1].items())))
        groups.setdefault(key, []).append((delay[0], delay[1], name))
    # the sync baseline of a sweep: a run of the same task, policy and setup that waits for
    # every chunk (no `execution`, or mode sync), what docs/live.md compares live runs against
    synced: dict[tuple, str] = {}
    for name, run in runs.items():
        snap = snapshot_runs.get(name) or {}
        execution = snap.get("execution") if isinstance(snap, dict) else None
        if (isinstance(execution, dict) and execution.get("mode") == "live") or not run.get("n"):
            continue
        synced.setdefault((run.get("task"), run.get("policy_label"), repr(sorted((setups.get(name) or ("", {}))[1].items()))), name)
    sweeps = []
    for key, members in groups.items():
        if len({d for d, _, _ in members}) < 2:
            continue
        members.sort()
        nominal = next((name for d, _, name in members if d == 0), None)
        rows = []
        for value, label, name in members:
            run = runs[name]
            comparison = None
            if nominal is not None and name != nominal:
                differences = setup_differences(setups.get(name), setups.get(nominal))
                comparison = compare_runs(name, run, nominal, runs[nominal], records_of.get(name), records_of.get(nominal),
                                          setup_differences=differences)
            stale = ((run.get("metrics") or {}).get("live_stale_ratio") or {}).get("mean")
            age_mean, age_max = _ages(records_of.get(name) or [])
            rows.append({"run": name, "delay": value, "delay_label": label, "k": run["k"], "n": run["n"],
                         "success_rate": run["success_rate"], "ci95": run["ci95"], "stale_ratio": stale,
                         "age_mean": age_mean, "age_max": age_max, "vs_nominal": comparison})
        compared = [r["vs_nominal"] for r in rows if r["vs_nominal"] is not None]
        note = adjust_holm(compared) if compared else None
        task, policy, hold, horizon, clock, unit, setup = key
        sync_name = synced.get((task, policy, setup))
        sync = None
        if sync_name is not None:
            base = runs[sync_name]
            sync = {"run": sync_name, "k": base["k"], "n": base["n"], "success_rate": base["success_rate"], "ci95": base["ci95"]}
        hz = {runs[name].get("control_hz") for _, _, name in members}
        step_ms = 1000.0 / next(iter(hz)) if unit == "steps" and len(hz) == 1 and next(iter(hz)) else None
        sweeps.append({"task": task, "policy": policy, "hold": hold, "execute_horizon": horizon, "clock": clock,
                       "unit": unit, "nominal": nominal, "rows": rows, "multiplicity": note, "sync": sync,
                       "step_ms": step_ms})
    return sweeps


#: Line colours of the execute horizons overlaid on one delay plot, in order.
SERIES_COLOURS = ("#1f6feb", "#16a34a", "#9333ea", "#ca8a04", "#0891b2")


def delay_figures(sweeps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The sweeps grouped into one figure each per task, policy, hold rule, clock and delay
    unit: sweeps that differ only in their execute horizon ``s`` are overlaid on one plot."""
    figures: dict[tuple, list[dict[str, Any]]] = {}
    for sweep in sweeps:
        key = (sweep["task"], sweep["policy"], sweep["hold"], sweep["clock"], sweep["unit"], sweep.get("step_ms"))
        figures.setdefault(key, []).append(sweep)
    return list(figures.values())


def sweep_svg(sweeps: dict[str, Any] | list[dict[str, Any]], width: int = 640, height: int = 280) -> str:
    """An inline SVG plot of success rate (with its 95 % interval) against delay, one line per
    sweep of ``sweeps`` (the execute horizons of one figure, :func:`delay_figures`, each its
    colour, named ``s = N`` in a legend), the sync baseline dashed; ``width`` CSS pixels wide at
    most and narrower on a narrow screen (its ``viewBox`` scales)."""
    group = [sweeps] if isinstance(sweeps, dict) else list(sweeps)
    series = [(sweep, [r for r in sweep["rows"] if r["success_rate"] is not None]) for sweep in group]
    series = [(sweep, rows) for sweep, rows in series if rows]
    if not series:
        return ""
    step_ms = series[0][0].get("step_ms")
    left, right, top, bottom = 44, 30 if step_ms else 12, 10, 46 if step_ms else 34
    xs = sorted({r["delay"] for _, rows in series for r in rows})
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1.0

    def px(x: float) -> float:
        return left + (x - x0) / span * (width - left - right)

    def py(y: float) -> float:
        return top + (1 - y) * (height - top - bottom)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'style="max-width: 100%; height: auto" role="img" aria-label="success rate against delay" class="delay-plot">']
    for tick in (0, 0.5, 1):
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{py(tick):.1f}" y2="{py(tick):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{py(tick) + 4:.1f}" font-size="10" text-anchor="end">{tick:.0%}</text>')
    for value in xs:
        x = px(value)
        parts.append(f'<text x="{x:.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="middle">{value:g}</text>'
                     + (f'<text x="{x:.1f}" y="{height - bottom + 26}" font-size="10" text-anchor="middle" fill="#555">'
                        f'{value * step_ms:g} ms</text>' if step_ms else ""))
    sync = next((sweep.get("sync") for sweep, _ in series if sweep.get("sync")), None)
    if sync and sync.get("success_rate") is not None:  # the baseline the delays are measured against
        y_sync = py(sync["success_rate"])
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y_sync:.1f}" y2="{y_sync:.1f}" stroke="#c2410c" '
                     f'stroke-dasharray="6 4" class="sync-baseline"/>'
                     f'<text x="{width - right}" y="{y_sync - 4 if y_sync - 4 >= top + 10 else y_sync + 14:.1f}" font-size="11" text-anchor="end" fill="#c2410c">'
                     f'sync {sync["success_rate"]:.0%}</text>')
    for index, (sweep, rows) in enumerate(series):
        colour = SERIES_COLOURS[index % len(SERIES_COLOURS)]
        shift = (index - (len(series) - 1) / 2) * 4  # overlaid intervals side by side, not on top of each other
        for r in rows:
            x = px(r["delay"]) + shift
            low, high = r["ci95"] if r["ci95"] else (r["success_rate"], r["success_rate"])
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py(low):.1f}" y2="{py(high):.1f}" stroke="{colour}" '
                         f'stroke-opacity="0.5"/>')
        points = " ".join(f"{px(r['delay']) + shift:.1f},{py(r['success_rate']):.1f}" for r in rows)
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2" class="delay-series"/>')
        parts += [f'<circle cx="{px(r["delay"]) + shift:.1f}" cy="{py(r["success_rate"]):.1f}" r="3" fill="{colour}"/>'
                  for r in rows]
        if len(series) > 1:  # the legend: which line is which execute horizon
            y_key = top + 14 + 14 * index
            parts.append(f'<line x1="{left + 10}" x2="{left + 28}" y1="{y_key - 4}" y2="{y_key - 4}" stroke="{colour}" '
                         f'stroke-width="2"/><text x="{left + 32}" y="{y_key}" font-size="11">s = {sweep["execute_horizon"]}</text>')
    unit = "delay (control steps)" if series[0][0]["unit"] == "steps" else "delay (ms)"
    if step_ms:
        unit = f"delay: control steps, and ms (one step is {step_ms:g} ms)"
    parts.append(f'<text x="{(left + width - right) / 2:.0f}" y="{height - 4}" font-size="11" text-anchor="middle">{unit}</text></svg>')
    return "".join(parts)
