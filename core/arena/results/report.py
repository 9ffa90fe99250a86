"""The static HTML report: ``<output_dir>/index.html`` (opens from disk: no network, no
scripts, inline CSS and SVG; links are relative so the directory can be copied anywhere).

First, the comparison the experiment was written for: a matrix's runs laid out by its axes
(:mod:`arena.results.matrix`; a checkpoint axis drawn against step), a delay sweep's curve, a
perturbation sweep's failure drivers; a pooled rate only for plain runs. Then: runs (task, policy, k/n, success rate with its 95 % Wilson interval, failures,
timeouts and errors apart, seeds, state, watchdog restarts); an SVG chart of success rates
with interval whiskers and a breakdown by task (and by policy: pooled and macro), both folded
(``<details>``) where a section above leads, since they repeat the runs; every pair of
policies on one task compared (difference and its Newcombe interval, with a forest plot and
paired seeds; policies against each other and their baselines first, arena's baselines against
each other last: :func:`ordered_comparisons`); request latency from the records (``latency``, ``server_timing``); config and
provenance (arena and plugin versions, git commit, command, machines, seeds, the resolved
``experiment.yaml``); each run's episodes (errors and failures first) linked to their videos
and to the run's ``server.log``. Everything is escaped. At 1,400 px no table needs a scroll
bar (task names wrap at ``_`` and ``/``); on a phone wide tables scroll in their own boxes;
chart rows are one line each, of whole pixels (``tests/results/test_report_browser.py``
measures it in headless Chromium).

By default the report can be shared: host names, the kernel and local paths are left out
(:mod:`arena.results.redact`); ``redact=False`` (``arena report DIR --no-redact``) writes them in.
"""

from __future__ import annotations

import os
import re
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from arena.fsutil import write_text_atomic
from arena.outputs.layout import EXPERIMENT_FILE, REPORT_FILE
from arena.results.aggregate import build_experiment_result
from arena.results.run_summary import collect_run_records

_OUTCOME_ORDER = {"error": 0, "failure": 1, "timeout": 2, "success": 3}
#: arena's baseline policies (:mod:`arena.policies.simple`): compared with each other last.
BASELINE_POLICIES = frozenset({"zero_action", "random_action"})


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent.parent / "templates")),
        autoescape=True,
        # Records and result files may come from other arena versions and backends: a missing
        # optional field renders as empty rather than failing the whole report.
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pct"] = lambda v: f"{100 * v:.1f}%" if _is_number(v) else "–"
    env.filters["signed_pct"] = lambda v: f"{100 * v:+.1f}%" if _is_number(v) else "–"
    env.filters["ms"] = lambda v: f"{v:.1f} ms" if _is_number(v) else "–"
    env.filters["num"] = format_number
    env.filters["when"] = format_time
    env.filters["policy"] = _policy_label
    env.filters["breakable"] = breakable
    env.globals["sweep_svg"] = lambda sweep: markupsafe.Markup(_sweep_svg(sweep))
    env.globals["delay_figures"] = _delay_figures
    env.globals["series_svg"] = lambda matrix: markupsafe.Markup(_series_svg(matrix))
    from arena.results.sweep_plot import factor_svg

    env.globals["factor_svg"] = factor_svg
    env.filters["shell"] = lambda argv: shlex.join(str(a) for a in argv) if isinstance(argv, (list, tuple)) else "–"
    return env


def _delay_figures(sweeps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    from arena.results.delay import delay_figures

    return delay_figures(sweeps)


def _series_svg(matrix: dict[str, Any]) -> str:
    """A matrix's checkpoint series (:mod:`arena.results.matrix`) as success against training
    step, one line per combination of its other axes, with Wilson intervals."""
    from arena.results.curve import Point, curve_svg

    lines = {
        line: [Point(c["step"], c["run"], float(c["success_rate"]), *(c.get("ci95") or (None, None)), int(c.get("n") or 0), c.get("k"))
               for c in cells if c.get("success_rate") is not None]
        for line, cells in (matrix.get("series") or {}).get("lines", {}).items()
    }
    lines = {line: points for line, points in lines.items() if points}
    return curve_svg("success_rate", lines, css_class="series-plot", keep_order=True) if lines else ""


def _sweep_svg(sweep: dict[str, Any] | list[dict[str, Any]]) -> str:
    from arena.results.delay import sweep_svg

    return sweep_svg(sweep)


def breakable(text: Any) -> markupsafe.Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each ``_``, ``/`` and
    ``.``: a 90-character LIBERO task name wraps at its words instead of widening its column."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"([_/.])(?=.)", r"\1<wbr>", escaped))


def ordered_comparisons(comparisons: list[dict[str, Any]], runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparisons as the report lists them: those a user asked for (a policy against
    another or against its baselines) first, then baselines against each other
    (:data:`BASELINE_POLICIES` on both sides, marked ``baselines_only``); each part in the
    order given. The comparisons themselves are not changed."""

    def baseline(name: str) -> bool:
        return str((runs.get(name, {}).get("policy") or {}).get("type")) in BASELINE_POLICIES

    marked = [{**c, "baselines_only": baseline(c.get("a")) and baseline(c.get("b"))} for c in comparisons]
    return sorted(marked, key=lambda c: c["baselines_only"])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_number(value: Any, decimals: int = 2) -> str:
    """A return or other score as the report prints it: fixed decimals with thousands
    separators (``1,660.35``, ``0.00``, ``-3.10``), never an exponent; ``–`` for no number."""
    if not _is_number(value) or value != value:  # None, text, NaN
        return "–"
    return f"{value:,.{decimals}f}"


def format_time(value: Any) -> str:
    """``2026-01-02 03:04:05 UTC`` of an ISO 8601 timestamp (whole seconds, in UTC); other
    text is returned unchanged, nothing as ``–``."""
    if not value:
        return "–"
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if moment.tzinfo is not None else "")


def _policy_label(policy: Any) -> str:
    from arena.results.labels import policy_label

    return policy_label(policy) if policy else "–"


def render_report(
    output_dir: str | os.PathLike[str], result: dict[str, Any] | None = None, *, redact: bool = True
) -> str:
    """The report's HTML for ``output_dir`` (``result``: an experiment result; rebuilt if None).

    ``redact``: leave out host names, the kernel and local paths (see
    :mod:`arena.results.redact`), so the page can be shared.
    """
    output_dir = Path(output_dir)
    if result is None:
        result = build_experiment_result(output_dir)
    episodes: dict[str, list[dict[str, Any]]] = {}
    for name in result["runs"]:
        records = collect_run_records(output_dir / name)
        records.sort(key=lambda r: (_OUTCOME_ORDER.get(r.outcome, 9), r.episode_index))
        episodes[name] = [r.model_dump(by_alias=True, mode="json") for r in records]
    snapshot = output_dir / EXPERIMENT_FILE
    config_text = snapshot.read_text(encoding="utf-8", errors="replace") if snapshot.exists() else None
    if redact:
        from arena.results.redact import redact_for_sharing

        result, episodes, config_text = redact_for_sharing(result, episodes, config_text, output_dir)
    template = _environment().get_template("report.html.j2")
    return template.render(
        result=result, episodes=episodes, prov=result.get("provenance"), config_text=config_text, redacted=redact,
        comparisons=ordered_comparisons(result.get("comparisons") or [], result["runs"]),
    )


def write_report(
    output_dir: str | os.PathLike[str], result: dict[str, Any] | None = None, *, redact: bool = True
) -> Path:
    """Write ``<output_dir>/index.html``; return its path.

    ``result``: the experiment result just built; ``None`` rebuilds it (refreshing
    ``experiment_result.json``). ``redact``: see :func:`render_report`.
    """
    output_dir = Path(output_dir)
    if result is None:
        result = build_experiment_result(output_dir)
    path = output_dir / REPORT_FILE
    write_text_atomic(path, render_report(output_dir, result, redact=redact), fsync=False)
    return path
