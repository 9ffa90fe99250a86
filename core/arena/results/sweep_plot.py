"""The report's plot of a perturbation sweep: per factor, success rate against level, with the
95 % Wilson interval of each level's run (inline SVG, no plotting library).

Input: one factor's curve from :func:`arena.results.attribution.factor_curves` (the nominal point
first). Levels are placed evenly in sweep order (they may be numbers, colours or texts), the
nominal one drawn hollow; the y axis is 0-100 %. A level that could not run reads "not run"
where its point would be; a point's tooltip counts its error episodes.
"""

from __future__ import annotations

from typing import Any

import markupsafe

WIDTH, HEIGHT = 260, 150
LEFT, RIGHT, TOP, BOTTOM = 34, 10, 18, 30


def _level_text(level: Any) -> str:
    if isinstance(level, float):
        return f"{level:g}"
    if isinstance(level, list):
        return "[" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in level) + "]"
    text = str(level)
    return text if len(text) <= 12 else text[:11] + "…"


def factor_svg(factor: str, curve: list[dict[str, Any]], unit: str | None = None) -> markupsafe.Markup:
    """An ``<svg>`` of ``curve`` titled ``factor`` (escaped; safe to put in the page), its x axis
    named by the factor's ``unit`` (``level`` without one)."""
    esc = markupsafe.escape
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    n = max(len(curve), 1)

    def x(i: int) -> float:
        return LEFT + (inner_w * (i + 0.5) / n)

    def y(rate: float) -> float:
        return TOP + inner_h * (1 - rate)

    parts = [f'<svg class="sweep-plot" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{esc(factor)}: success rate against level">',
             f'<text x="{LEFT}" y="12" class="plot-title">{esc(factor)}</text>']
    for tick in (0, 0.5, 1):
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" class="grid"/>'
                     f'<text x="{LEFT - 4}" y="{y(tick) + 3:.1f}" text-anchor="end" class="tick">{int(tick * 100)}%</text>')
    points = []
    for i, point in enumerate(curve):
        rate, ci = point.get("success_rate"), point.get("ci95") or [None, None]
        label = _level_text(point.get("level")) + (" (nominal)" if point.get("nominal") else "")
        parts.append(f'<text x="{x(i):.1f}" y="{HEIGHT - 14}" text-anchor="middle" class="tick">{esc(_level_text(point.get("level")))}</text>')
        if rate is None:  # a level that could not run: said where its point would be
            parts.append(f'<text x="{x(i):.1f}" y="{y(0.5):.1f}" text-anchor="middle" class="tick not-run">'
                         f'not run<title>{esc(factor)} = {esc(label)}: could not run</title></text>')
            continue
        points.append(f"{x(i):.1f},{y(rate):.1f}")
        if ci[0] is not None:
            parts.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(ci[0]):.1f}" y2="{y(ci[1]):.1f}" class="ci"/>')
        title = f"{factor} = {label}: {point.get('k')}/{point.get('n')} = {100 * rate:.1f}%"
        if ci[0] is not None:
            title += f" [{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"
        if point.get("errors"):
            title += f"; {point['errors']} of {point.get('episodes')} episodes errored"
        fill = "none" if point.get("nominal") else "currentColor"
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(rate):.1f}" r="3.5" fill="{fill}" class="point"><title>{esc(title)}</title></circle>')
    if len(points) > 1:
        parts.insert(2, f'<polyline points="{" ".join(points)}" class="line"/>')
    parts.append(f'<text x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 2}" text-anchor="middle" class="tick">{esc(unit or "level")}</text></svg>')
    return markupsafe.Markup("".join(parts))
