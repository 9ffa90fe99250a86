"""What ``arena compare A B`` decides and shows, in named steps; the CLI only parses and prints.

1. :func:`check_comparable`: refuse (``ConfigError``, exit 2) two directories with nothing to
   compare, or runs whose setups differ unless forced;
2. :func:`partial_lines` and :func:`exit_code`: runs whose numbers cover less than planned
   (exit 3);
3. :func:`table` and :func:`notes`: the rows and the lines printed under them (design of each
   comparison and why, Holm's adjustment, the methods used).

The figures come from :func:`arena.results.compare.compare_experiments`.
"""

from __future__ import annotations

from typing import Any, Optional

from rich.markup import escape

from arena.errors import ConfigError
from arena.results.compare import describe_value

HEADERS = ("run", "task", "A", "B", "B − A", "95% CI", "design", "p", "paired seeds: only A / only B")


def setup_difference_lines(data: dict[str, Any]) -> list[str]:
    """One line per setting that differs between two runs of one name."""
    return [
        f"run {run}: {d['key']}: {describe_value(d['a'])} (A) vs {describe_value(d['b'])} (B)"
        for run, diffs in data["differences"].items()
        for d in diffs
    ]


def check_comparable(data: dict[str, Any], a: Any, b: Any, force: bool) -> list[str]:
    """The setup differences to show (forced); raises when the comparison must be refused.

    Raises:
        ConfigError: ``a`` and ``b`` are one directory (unless runs are paired by name), have
            no run name in common, or (without
            ``force``) a pair of runs differs in its setup (each difference named).
    """
    if data["same_directory"] and not data.get("pairs"):
        raise ConfigError(
            f"{a} and {b} are the same output directory: every difference would be 0; give two experiments, or name "
            "two of its runs with --pair RUN_A:RUN_B"
        )
    if not data["runs"]:
        names_a = ", ".join(data["only_a"]) or "none"
        names_b = ", ".join(data["only_b"]) or "none"
        raise ConfigError(f"{a} and {b} have no run names in common (A: {names_a}; B: {names_b}); nothing to compare")
    differences = setup_difference_lines(data)
    if differences and not force:
        raise ConfigError(
            "these runs differ in their setup, so their success rates are not comparable:\n  "
            + "\n  ".join(differences)
            + "\n(--force compares them anyway)"
        )
    return differences


def partial_lines(data: dict[str, Any]) -> list[str]:
    """``run R in A: why`` for each compared run that is partial."""
    return [f"run {p['run']} in {p['side']}: {p['note']}" for p in data["partial"]]


def exit_code(data: dict[str, Any]) -> int:
    """3 when a compared run is partial, else 0."""
    return 3 if data["partial"] else 0


def _pct(v: Optional[float], signed: bool = False) -> str:
    return "-" if v is None else (f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%")


def _side(row: dict[str, Any], x: str) -> str:
    text = f"{row[f'k_{x}']}/{row[f'n_{x}']} {_pct(row[f'rate_{x}'])}"
    if row[f"errors_{x}"]:
        text += f" err {row[f'errors_{x}']}"
    if row[f"partial_{x}"]:
        text += f" [yellow]({escape(str(row[f'partial_{x}']))})[/]"
    return text


def _p(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def table(data: dict[str, Any]) -> list[list[str]]:
    """One row of rich-markup cells per compared run (see :data:`HEADERS`); bold: the 95 %
    interval excludes 0."""
    rows = []
    for row in data["runs"]:
        ci = row["ci95"]
        mark, end = ("[bold]", "[/]") if row["significant"] else ("", "")
        paired = row["paired"]
        p_text = _p(row.get("p_value"))
        if data.get("multiplicity") and row.get("p_holm") is not None:
            p_text += f" ({_p(row['p_holm'])})"
        rows.append([
            escape(row["run"]),
            escape(str(row["task"] or "-")),
            _side(row, "a"),
            _side(row, "b"),
            f"{mark}{_pct(row['difference'], True)}{end}",
            "-" if ci is None else f"{mark}[{_pct(ci[0], True)}, {_pct(ci[1], True)}]{end}",
            escape(row["design"]),
            p_text,
            "-" if paired is None else f"{paired['only_a']} / {paired['only_b']} of {paired['seeds']}",
        ])
    return rows


def suite_lines(data: dict[str, Any]) -> list[str]:
    """``suite S: B − A task-averaged … [low, high] over N tasks (design counts)``."""
    lines = []
    for s in data.get("suites", []):
        designs = ", ".join(f"{n} {d}" for d, n in sorted(s["designs"].items()))
        lines.append(
            f"suite {s['suite']}: task-averaged {_pct(s['macro_a'])} (A) vs {_pct(s['macro_b'])} (B), "
            f"B − A {_pct(s['difference'], True)} [{_pct(s['ci95'][0], True)}, {_pct(s['ci95'][1], True)}] "
            f"over {s['tasks']} common task(s) ({designs}; {s['ci_method']})"
        )
    return lines


def notes(data: dict[str, Any]) -> list[str]:
    """The lines under the table: each run's design and why, Holm, models, methods used."""
    lines = [escape(f"run {row['run']}: {row['design']}: {row['design_reason']}") for row in data["runs"]]
    for row in data["runs"]:
        if row.get("models_differ"):
            lines.append(
                "[yellow]" + escape(f"run {row['run']}: the same policy type was served by different models "
                                    f"({', '.join(row['models_differ'])} differ)") + "[/]"
            )
    lines.append("bold: the 95% interval excludes 0; p: "
                 + ("raw (Holm-adjusted in brackets)" if data.get("multiplicity") else "raw"))
    if data.get("multiplicity"):
        lines.append(data["multiplicity"])
    used = dict.fromkeys(m for row in data["runs"] for m in (row["ci_method"], row.get("test_method")) if m)
    if data.get("multiplicity"):
        used["holm"] = None
    for s in data.get("suites", []):
        used[s["ci_method"]] = None
    methods = data.get("methods", {})
    lines += [f"{m}: {methods[m]}" for m in used if m in methods]
    return lines
