"""A training curve: each run's success rate (and each episode metric) against training step.

``arena watch`` evaluates one checkpoint per ``arena run``; this module gathers what those
evaluations wrote (``watch.json`` for the steps, each output's ``experiment_result.json`` for
the numbers) into points, prints them as a table and draws them as a static HTML page
(``WATCH_DIR/index.html``: inline SVG, no scripts, no network) with the 95 % interval of every
point as an error bar. Success rates carry the Wilson interval ``experiment_result.json`` gives
(or, for a run stopped early by ``stop_when``, the confidence sequence's interval, the one
valid after stopping); episode metrics the interval their summary gives.

A point belongs to a *series*: one arena run of the experiment (``toy``, ``learned``) under one
experiment setup, so the curve never pools two runs (a learned policy and its zero-action
baseline stay two lines) nor joins points evaluated under different experiments: when the
watch saw the experiment change (``watch.json``'s ``series``, :mod:`arena.watch_setup`), the
points of its second setup are the series ``toy · setup 2``, and the table and the page say
what changed.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena.outputs.layout import EXPERIMENT_RESULT_FILE, REPORT_FILE


@dataclass(frozen=True)
class Point:
    """One evaluation of one run at one checkpoint: ``value`` in the metric's units, its
    interval ``[low, high]`` (``None`` when there is none), ``n`` the episodes behind it."""

    step: int | None
    checkpoint: str
    value: float
    low: float | None
    high: float | None
    n: int
    k: int | None = None


@dataclass
class Curve:
    """Points per ``(quantity, series)``: quantity ``success_rate`` or an episode metric's key."""

    points: dict[str, dict[str, list[Point]]] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)
    #: the experiment setups after the first (``watch.json``'s ``series[1:]``, numbered from 2)
    changes: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def add(self, quantity: str, series: str, point: Point) -> None:
        self.points.setdefault(quantity, {}).setdefault(series, []).append(point)

    def quantities(self) -> list[str]:
        return sorted(self.points, key=lambda q: (q != "success_rate", q))


def success_interval(run: dict[str, Any]) -> tuple[float | None, float | None]:
    """The interval valid for ``run``'s success rate: the confidence sequence's after an early
    stop (``stop.sequence_ci``), else the Wilson interval (``ci95``)."""
    stop = run.get("stop") if isinstance(run.get("stop"), dict) else None
    ci = (stop or {}).get("sequence_ci") or run.get("ci95") or [None, None]
    return (ci[0], ci[1]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else (None, None)


def series_name(run: str, setup: Any) -> str:
    """The series of ``run``'s points under experiment setup ``setup`` (1-based; ``None``, an
    entry from before setups were recorded, is the first): ``toy``, ``toy · setup 2``."""
    return run if not setup or setup == 1 else f"{run} · setup {setup}"


def gather(watch_dir: str | Path, checkpoints: dict[str, dict[str, Any]], series: list[dict[str, Any]] | None = None) -> Curve:
    """The curve of a watch's evaluations: ``checkpoints`` is ``watch.json``'s entries,
    ``series`` its experiment setups."""
    curve = Curve(changes=[(i + 1, s) for i, s in enumerate(series or []) if i > 0])
    order = sorted(checkpoints.items(), key=lambda kv: (kv[1].get("step") is None, kv[1].get("step") or 0, kv[0]))
    for name, entry in order:
        if entry.get("state") == "failed":
            curve.failed.append({"checkpoint": name, **entry})
        if entry.get("state") not in ("done", "failed"):
            continue
        try:
            result = json.loads((Path(entry["output_dir"]) / EXPERIMENT_RESULT_FILE).read_text())
        except (OSError, ValueError, KeyError, TypeError):
            continue
        step = entry.get("step")
        for name_of_run, data in (result.get("runs") or {}).items():
            run = series_name(name_of_run, entry.get("series"))
            if data.get("success_rate") is not None:
                low, high = success_interval(data)
                curve.add("success_rate", run, Point(step, name, float(data["success_rate"]), low, high, int(data.get("n") or 0), int(data.get("k") or 0)))
            for key, summary in (data.get("metrics") or {}).items():
                if isinstance(summary, dict) and isinstance(summary.get("mean"), (int, float)) and math.isfinite(summary["mean"]):
                    curve.add(key, run, Point(step, name, float(summary["mean"]), summary.get("ci_low"), summary.get("ci_high"),
                                              int(summary.get("episodes") or 0)))
    return curve


def point_text(quantity: str, point: Point) -> str:
    """``"7/10 = 70% [40, 89]"`` for a success rate, ``"0.734 [0.61, 0.85]"`` for a metric."""
    if quantity == "success_rate":
        head = f"{point.k}/{point.n} = {point.value:.0%}"
        return head + (f" [{point.low * 100:.0f}, {point.high * 100:.0f}]" if point.low is not None and point.high is not None else "")
    head = f"{point.value:.3g}"
    return head + (f" [{point.low:.3g}, {point.high:.3g}]" if point.low is not None and point.high is not None else "")


def table_lines(curve: Curve) -> list[str]:
    """The summary table ``arena watch`` prints: one line per checkpoint, one column per run's
    success rate, then the failed evaluations with their reason."""
    series = sorted(curve.points.get("success_rate", {}))
    rows: dict[str, tuple[int | None, dict[str, str]]] = {}
    for run in series:
        for point in curve.points["success_rate"][run]:
            rows.setdefault(point.checkpoint, (point.step, {}))[1][run] = point_text("success_rate", point)
    header = ["step", "checkpoint", *series]
    body = [[str(step) if step is not None else "-", name, *(cells.get(run, "-") for run in series)]
            for name, (step, cells) in sorted(rows.items(), key=lambda kv: (kv[1][0] is None, kv[1][0] or 0, kv[0]))]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *body]]
    lines.extend(change_lines(curve))
    for entry in curve.failed:
        lines.append(f"FAILED {entry['checkpoint']} (step {entry.get('step')}): {_failure_text(entry)}"
                     + ("" if entry.get("unreadable") else f"; output {entry.get('output_dir')}"))
    return lines


def change_lines(curve: Curve) -> list[str]:
    """One line per experiment setup after the first: from which checkpoint, what changed."""
    return [f"setup {number} (from {s.get('first')}): the experiment changed: {'; '.join(s.get('changes') or ['(not recorded)'])}; "
            f"its points are the series '· setup {number}', not joined to the earlier ones" for number, s in curve.changes]


def _failure_text(entry: dict[str, Any]) -> str:
    """A failed evaluation's reason and attempts, and what tries it again (an unreadable
    checkpoint: not evaluated, checked again once rewritten; any other: a restarted watch)."""
    reason = entry.get("reason") or "exit " + str(entry.get("exit_code"))
    if entry.get("unreadable"):
        return f"{reason}; not evaluated (rewrite it and the watch checks it again)"
    return f"{reason} after {entry.get('attempts', 1)} attempt(s); start the watch again to retry it once the cause is fixed"


# -- the page ------------------------------------------------------------------------------------
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_W, _H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 640, 300, 56, 16, 16, 40


def curve_svg(quantity: str, lines: dict[str, list[Point]], *, css_class: str = "curve", keep_order: bool = False) -> str:
    """``lines`` (series -> points in step order) drawn against training step as inline SVG
    (640 x 300 user units, scaled to its box), each point with its interval as an error bar,
    and a legend below; ``css_class`` names the ``<svg>`` for the page's styles. The watch page
    and the experiment report's checkpoint series (:mod:`arena.results.matrix`) draw with it.
    Lines are drawn and listed by name, or in the order given with ``keep_order`` (a matrix's
    lines in its table's column order)."""
    if not keep_order:
        lines = dict(sorted(lines.items()))
    points = [p for ps in lines.values() for p in ps]
    steps = [float(p.step if p.step is not None else i) for i, p in enumerate(points)]
    lo_x, hi_x = min(steps), max(steps)
    if hi_x == lo_x:
        lo_x, hi_x = lo_x - 1, hi_x + 1
    margin = (hi_x - lo_x) * 0.04  # the first and last points' bars clear the frame
    lo_x, hi_x = lo_x - margin, hi_x + margin
    if quantity == "success_rate":
        lo_y, hi_y = 0.0, 1.0
    else:
        values = [v for p in points for v in (p.value, p.low, p.high) if v is not None and math.isfinite(v)]
        lo_y, hi_y = min(values), max(values)
        if hi_y == lo_y:
            lo_y, hi_y = lo_y - 0.5, hi_y + 0.5
    width, height = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def x(v: float) -> float:
        return _PAD_L + (v - lo_x) / (hi_x - lo_x) * width

    def y(v: float) -> float:
        return _PAD_T + (1 - (min(max(v, lo_y), hi_y) - lo_y) / (hi_y - lo_y)) * height

    parts = [f'<svg class="{html.escape(css_class)}" viewBox="0 0 {_W} {_H}" role="img" aria-label="{html.escape(quantity)} against training step">',
             f'<rect x="{_PAD_L}" y="{_PAD_T}" width="{width}" height="{height}" fill="none" stroke="#999"/>']
    for i in range(5):
        v = lo_y + (hi_y - lo_y) * i / 4
        label = f"{v:.0%}" if quantity == "success_rate" else f"{v:.3g}"
        parts.append(f'<line x1="{_PAD_L}" x2="{_PAD_L + width}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
                     f'<text x="{_PAD_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{label}</text>')
    for v in sorted(set(steps)):
        parts.append(f'<text x="{x(v):.1f}" y="{_PAD_T + height + 16}" text-anchor="middle">{v:g}</text>')
    parts.append(f'<text x="{_PAD_L + width / 2}" y="{_H - 4}" text-anchor="middle">training step</text>')
    for color, (series, ps) in zip(_COLORS * 8, lines.items()):
        xy = [(x(float(p.step if p.step is not None else i)), p) for i, p in enumerate(ps)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                     + " ".join(f"{px:.1f},{y(p.value):.1f}" for px, p in xy) + '"/>')
        for px, p in xy:
            if p.low is not None and p.high is not None:
                parts.append(f'<line class="ci" x1="{px:.1f}" x2="{px:.1f}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}" stroke="{color}"/>'
                             f'<line x1="{px - 4:.1f}" x2="{px + 4:.1f}" y1="{y(p.low):.1f}" y2="{y(p.low):.1f}" stroke="{color}"/>'
                             f'<line x1="{px - 4:.1f}" x2="{px + 4:.1f}" y1="{y(p.high):.1f}" y2="{y(p.high):.1f}" stroke="{color}"/>')
            parts.append(f'<circle cx="{px:.1f}" cy="{y(p.value):.1f}" r="3.5" fill="{color}">'
                         f'<title>{html.escape(series)} step {p.step}: {html.escape(point_text(quantity, p))}</title></circle>')
    parts.append("</svg>")
    legend = " ".join(f'<span class="key"><span style="background:{c}"></span>{html.escape(s)}</span>'
                      for c, s in zip(_COLORS * 8, lines))
    return "".join(parts) + f'<p class="legend">{legend}</p>'


def render_page(curve: Curve, title: str) -> str:
    """The watch's report page: one chart per quantity (success rate first), each with a table
    of its points, and the failed evaluations."""
    out = ["<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{html.escape(title)}</title><style>",
           "body{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:900px;padding:0 1rem;color:#222}",
           "svg{width:100%;height:auto;font-size:12px}@media (max-width:40rem){svg{font-size:17px}}.legend .key{margin-right:1rem;overflow-wrap:anywhere}",
           ".legend .key span{display:inline-block;width:.8em;height:.8em;margin-right:.3em}",
           "table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{padding:.2rem .6rem;border-bottom:1px solid #ddd;text-align:left}",
           # a phone scrolls the table in its own box rather than break a run's name letter by letter
           ".scroll{overflow-x:auto;max-width:100%}td.value{white-space:nowrap}",
           ".failed{color:#a00}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>",
           "<p>Each point is one checkpoint's evaluation of one run; bars are 95 % intervals (success: Wilson, or the "
           "confidence sequence's after an early stop; episode metrics: the interval of their summary). Runs are never pooled.</p>"]
    if not curve.points:
        out.append("<p>No evaluation has finished yet.</p>")
    for quantity in curve.quantities():
        lines = curve.points[quantity]
        name = "success rate" if quantity == "success_rate" else quantity
        out.append(f'<section class="quantity" id="{html.escape(quantity)}"><h2>{html.escape(name)} against training step</h2>')
        out.append(curve_svg(quantity, lines))
        out.append("<div class=\"scroll\"><table><tr><th>run</th><th>step</th><th>checkpoint</th><th>value [95 % interval]</th><th>episodes</th></tr>")
        for series, ps in sorted(lines.items()):
            for p in ps:
                out.append(f"<tr><td>{html.escape(series)}</td><td>{p.step if p.step is not None else '-'}</td>"
                           f"<td>{html.escape(p.checkpoint)}</td><td class=\"value\">{html.escape(point_text(quantity, p))}</td><td>{p.n}</td></tr>")
        out.append("</table></div></section>")
    if curve.changes:
        out.append('<h2>Changed experiment</h2><ul class="changes">')
        out.extend(f"<li>{html.escape(line)}</li>" for line in change_lines(curve))
        out.append("</ul>")
    if curve.failed:
        out.append('<h2>Failed evaluations</h2><ul class="failed">')
        for entry in curve.failed:
            out.append(f"<li>{html.escape(entry['checkpoint'])} (step {entry.get('step')}): {html.escape(_failure_text(entry))}</li>")
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out)


def write_page(watch_dir: str | Path, checkpoints: dict[str, dict[str, Any]], title: str,
               series: list[dict[str, Any]] | None = None) -> Path:
    """Write ``WATCH_DIR/index.html`` atomically (``series``: ``watch.json``'s experiment
    setups); returns its path.

    Raises:
        OSError: the page cannot be written.
    """
    from arena.fsutil import write_text_atomic

    path = Path(watch_dir) / REPORT_FILE
    write_text_atomic(path, render_page(gather(watch_dir, checkpoints, series), title))
    return path
