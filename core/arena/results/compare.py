"""``arena compare A B``: two experiments (output directories), run by run.

Runs are matched by name. For each pair: both success rates as k/n, the difference
``B - A`` with its 95 % interval and a test — paired (Newcombe's interval for paired data,
McNemar's exact test) when the runs' setups agree, else unpaired (Newcombe 1998 method 10,
Fisher's exact test; see :mod:`arena.results.difference_stats`), with Holm-adjusted p-values when
several are shown — whether that interval excludes 0, and — when both
played some of the same seeds — the outcome pairs on those seeds (``only_a``/``only_b``:
seeds only one side solved; a paired view that seeds recorded per episode make possible).
Runs present on one side only are listed as such. ``pairs`` names the runs to compare
instead (``[(run of A, run of B), ...]``): then A and B may be one directory, e.g. two
policies of one experiment (``arena compare OUT OUT --pair vla:openpi``).

Only like runs are compared. Two runs of one name must agree on the environment (type,
task and every other environment field but ``workers`` and ``python``, which cannot change
a result), the episode seeds (``environment_builder.seed`` and
``rollout_limit.num_episodes``) and the rollout limits, read from each directory's
snapshot (``experiment.yaml``; ``manifest.json`` for what it holds when there is none), and
on the records' protocol fingerprint (:mod:`arena.outputs.fingerprint`: simulator and
suite versions, init-state hash, seeding mode, image size, settle steps, step limit,
adapter, the last only between runs of one policy type; keys ``protocol.*``).
Where they differ, :func:`compare_experiments` lists the differences and the CLI refuses
(exit 2) unless ``--force`` — but for two runs named with ``--pair`` that differ only in their
perturbations (``environment.perturbations``): a perturbed run and its nominal one play the
same seeds, so they are compared paired (as a sweep's attribution compares them) and the
notes name the perturbation — and for two runs whose fingerprints declare the same episodes
(:func:`arena.outputs.fingerprint.declared_equivalence`: one simulator behind two wrappers, e.g.
the native ``pusht`` and the ``lerobot_env`` bridge's PushT): their environment and
fingerprint may differ (``wrapper_differences``), their seeds and rollout limits may not, and
they are compared paired, the notes saying so (``equivalent``). The policy may differ: that is what is being compared; when two
runs of the same policy type were served by different models (checkpoint, revision, image,
server metadata), the row says so (``models_differ``).

Runs whose numbers cover less than planned (cancelled, failed, still running, episodes
missing or error episodes) are marked (``partial_a`` / ``partial_b``); the CLI exits 3 when
any compared run is partial.

What the CLI prints, in named steps (the CLI only parses and prints):

1. :func:`check_comparable`: refuse (``ConfigError``, exit 2) two directories with nothing to
   compare, or runs whose setups differ unless forced;
2. :func:`partial_lines` and :func:`exit_code`: runs whose numbers cover less than planned
   (exit 3);
3. :func:`table`, :func:`suite_lines` and :func:`notes`: the rows and the lines printed under
   them (design of each comparison and why, Holm's adjustment, the methods used).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from rich.markup import escape

from arena.errors import ConfigError
from arena.outputs.fingerprint import common_fingerprint, declared_equivalence, fingerprint_differences
from arena.results.aggregate import build_experiment_result
from arena.results.difference_stats import is_perturbation, pairing_differences
from arena.results.groups import suite_comparison
from arena.results.labels import MODEL_IDENTITY_FIELDS, model_differences, models_differ
from arena.results.methods import METHODS
from arena.results.run_summary import counted_run_records
from arena.results.task_comparisons import adjust_holm, compare_runs
from arena.results.setups import run_setups, setup_differences

def compare_experiments(
    a: str | os.PathLike[str], b: str | os.PathLike[str], pairs: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """Compare output directories ``a`` and ``b`` (run by name, or the runs ``pairs`` names:
    a row ``"RUN_A vs RUN_B"`` each, no suite rows).

    Returns ``{"a": {experiment, path}, "b": {…}, "same_directory": bool, "runs": [row…],
    "only_a": [names], "only_b": [names], "differences": {run: [{key, a, b}…]},
    "partial": [{run, side, note}…]}``; a row holds ``run``, ``task``,
    ``policy_a``/``policy_b``, ``k_a``/``n_a``/``rate_a``/``errors_a``/``state_a``/
    ``partial_a`` (and ``_b``), ``difference`` (B − A), ``ci95``, ``significant``,
    ``paired``, ``setup_differences`` and ``models_differ`` (a list of what differs, or
    ``None``). Nothing is written into either directory.

    Raises:
        FileNotFoundError: a directory does not exist, or a run ``pairs`` names is not in it.
    """
    a, b = Path(a), Path(b)
    for path in (a, b):
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
    result_a = build_experiment_result(a, write=False)
    result_b = build_experiment_result(b, write=False)
    setups_a, setups_b = run_setups(a, result_a["runs"]), run_setups(b, result_b["runs"])
    rows = []
    differences: dict[str, list[dict[str, Any]]] = {}
    partial: list[dict[str, str]] = []
    if pairs is None:
        matched = [(name, name) for name in result_a["runs"] if name in result_b["runs"]]
    else:
        for side, path, result, names in (("A", a, result_a, [p[0] for p in pairs]), ("B", b, result_b, [p[1] for p in pairs])):
            for missing in [n for n in names if n not in result["runs"]]:
                raise FileNotFoundError(f"{path} ({side}) has no run {missing!r} (runs: {', '.join(result['runs'])})")
        matched = list(pairs)
    for name_a, name_b in matched:
        run_a, run_b = result_a["runs"][name_a], result_b["runs"][name_b]
        name = name_a if name_a == name_b else f"{name_a} vs {name_b}"
        # B - A: compare_runs computes first - second, so B goes first.
        records_a, records_b = counted_run_records(a / name_a), counted_run_records(b / name_b)
        fingerprint_a = _unperturbed(common_fingerprint(r.protocol for r in records_a))
        fingerprint_b = _unperturbed(common_fingerprint(r.protocol for r in records_b))
        protocol = fingerprint_differences(fingerprint_a, fingerprint_b)
        if _policy_type(run_a) != _policy_type(run_b):  # the adapter belongs to the compared policy
            protocol = [d for d in protocol if not d["key"].startswith("protocol.adapter")]
        setup = setup_differences(setups_a.get(name_a), setups_b.get(name_b)) + protocol
        pairing = pairing_differences(setups_a.get(name_a), setups_b.get(name_b), protocol)
        equivalent = declared_equivalence(fingerprint_a, fingerprint_b)
        wrapper: list[dict[str, Any]] = []
        if equivalent is not None:  # the same episodes behind two wrappers: only the wrapper differs
            wrapper = [d for d in setup if _wrapper_key(str(d["key"]))]
            setup = [d for d in setup if not _wrapper_key(str(d["key"]))]
            pairing = [d for d in pairing if not _wrapper_key(str(d["key"]))]
        row = compare_runs(name, run_b, name, run_a, records_b, records_a, pairing)
        paired = row["paired"]
        if paired is not None:  # flip the labels back to A/B
            paired = {**paired, "only_a": paired["only_b"], "only_b": paired["only_a"]}
        if setup:
            differences[name] = setup
        for side, run in (("A", run_a), ("B", run_b)):
            if run.get("partial_note"):
                partial.append({"run": name, "side": side, "note": run["partial_note"]})
        rows.append(
            {
                "run": name,
                "task": run_a.get("task") or run_b.get("task"),
                "policy_a": row["policy_b"],
                "policy_b": row["policy_a"],
                "k_a": run_a["k"], "n_a": run_a["n"], "rate_a": run_a["success_rate"], "errors_a": run_a["errors"],
                "k_b": run_b["k"], "n_b": run_b["n"], "rate_b": run_b["success_rate"], "errors_b": run_b["errors"],
                "state_a": run_a.get("state"), "state_b": run_b.get("state"),
                "partial_a": run_a.get("partial_note"), "partial_b": run_b.get("partial_note"),
                "difference": row["difference"],
                "ci95": row["ci95"],
                "ci_method": row["ci_method"],
                "significant": row["significant"],
                "design": row["design"],
                "design_reason": row["design_reason"],
                "p_value": row["p_value"],
                "test_method": row["test_method"],
                "discordant": None if row["discordant"] is None else row["discordant"][::-1],
                "paired": paired,
                "setup_differences": setup,
                "equivalent": equivalent,
                "wrapper_differences": wrapper,
                "models_differ": models_differ(run_a, run_b),
                "model_differences": model_differences(run_a, run_b),
            }
        )
    multiplicity = adjust_holm(rows)
    return {
        "a": {"experiment": result_a["experiment"], "path": str(a)},
        "b": {"experiment": result_b["experiment"], "path": str(b)},
        "same_directory": a.resolve() == b.resolve(),
        "pairs": None if pairs is None else [list(p) for p in pairs],
        "runs": rows,
        "only_a": [n for n in result_a["runs"] if n not in result_b["runs"]] if pairs is None else [],
        "only_b": [n for n in result_b["runs"] if n not in result_a["runs"]] if pairs is None else [],
        "differences": differences,
        "partial": partial,
        "multiplicity": multiplicity,
        "suites": _suite_rows(result_a, result_b, rows) if pairs is None else [],
        "methods": METHODS,
    }


def _wrapper_key(key: str) -> bool:
    """A setup or fingerprint key two wrappers of one simulator may differ in: the environment
    (type and fields) and the fingerprint's keys; never the seeds or the rollout limits."""
    return key.startswith(("environment.", "protocol."))


def _unperturbed(fingerprint: Any) -> Any:
    """A run's common fingerprint less its ``perturbations`` (compared as the setup's
    ``environment.perturbations``): ``None`` when nothing else is left, as for a nominal run of
    an environment that declares no fingerprint."""
    if isinstance(fingerprint, dict) and "perturbations" in fingerprint:
        return {k: v for k, v in fingerprint.items() if k != "perturbations"} or None
    return fingerprint


def _suite_rows(result_a: dict[str, Any], result_b: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Suites (expanded runs, :func:`arena.results.groups.by_group`) of one name in A and B:
    ``B − A`` task-averaged over their common tasks from the per-task rows."""
    by_run = {row["run"]: row for row in rows}
    out = []
    for name, group_a in result_a.get("by_group", {}).items():
        group_b = result_b.get("by_group", {}).get(name)
        if group_b is None:
            continue
        task_rows = {}
        for run in group_a["runs"]:
            row = by_run.get(run)
            if row is not None and row["task"] is not None:
                task_rows[row["task"]] = {
                    "task": row["task"], "design": row["design"], "k_a": row["k_a"], "n_a": row["n_a"],
                    "k_b": row["k_b"], "n_b": row["n_b"],
                    # suite_comparison reads the A-first orientation of the pairs
                    "paired": row["paired"] and {"seeds": row["paired"]["seeds"], "only_a": row["paired"]["only_a"],
                                                 "only_b": row["paired"]["only_b"]},
                }
        result = suite_comparison(group_a, group_b, task_rows)
        if result is not None:
            out.append({"suite": name, "macro_a": group_a["macro_success_rate"], "macro_b": group_b["macro_success_rate"],
                        **result})
    return out



def _policy_type(run: dict[str, Any]) -> Any:
    policy = run.get("policy")
    return policy.get("type") if isinstance(policy, dict) else policy


def describe_value(value: Any, limit: int = 80) -> str:
    """A short printable form of a setting's value (``null`` for None, strings unquoted)."""
    from arena.errors import short_repr

    if value is None or isinstance(value, (bool, int, float)):
        import json

        return json.dumps(value)  # as YAML and JSON spell it: null, true, 100
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    return short_repr(value, limit)


#: The columns of the table :func:`table` fills.
HEADERS = ("run", "task", "A", "B", "B − A", "95% CI", "design", "p", "paired seeds: only A / only B")


def setup_difference_lines(data: dict[str, Any], perturbations: bool = True) -> list[str]:
    """One line per setting that differs between two compared runs (``perturbations=False``:
    leaving out the perturbations, :func:`arena.results.difference_stats.is_perturbation`)."""
    return [
        f"run {run}: {d['key']}: {describe_value(d['a'])} (A) vs {describe_value(d['b'])} (B)"
        for run, diffs in data["differences"].items()
        for d in diffs
        if perturbations or not is_perturbation(str(d["key"]))
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
    refused = setup_difference_lines(data, perturbations=not data.get("pairs"))
    if refused and not force:
        raise ConfigError(
            "these runs differ in their setup, so their success rates are not comparable:\n  "
            + "\n  ".join(refused)
            + "\n(--force compares them anyway; a perturbed run and its nominal one, named with --pair, are compared "
            "paired without it)"
        )
    return refused


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


def model_note(row: dict[str, Any]) -> str:
    """What differs between the models behind a row's two runs of one policy type, by field:
    ``different models (checkpoint: A …, B …)`` when the model itself differs, else ``the same
    model served with different settings: server_metadata.n_action_steps (A 10, B 20)``."""
    from arena.errors import short_repr

    found = row.get("model_differences") or [{"key": k, "a": None, "b": None} for k in row.get("models_differ") or []]
    described = ", ".join(f"{d['key']} (A {short_repr(d['a'])}, B {short_repr(d['b'])})" for d in found)
    if any(d["key"] in MODEL_IDENTITY_FIELDS for d in found):
        return f"run {row['run']}: the same policy type was served by different models: {described}"
    return f"run {row['run']}: the same model was served with different settings: {described}"


def notes(data: dict[str, Any]) -> list[str]:
    """The lines under the table: each run's design and why, Holm, models, methods used."""
    lines = [escape(f"run {row['run']}: {row['design']}: {row['design_reason']}") for row in data["runs"]]
    for row in data["runs"]:
        if row.get("models_differ"):
            lines.append("[yellow]" + escape(model_note(row)) + "[/]")
        perturbed = [d for d in row.get("setup_differences") or [] if is_perturbation(str(d["key"]))]
        if perturbed:
            described = ", ".join(f"{d['key']} (A {describe_value(d['a'])}, B {describe_value(d['b'])})" for d in perturbed)
            lines.append(escape(f"run {row['run']}: the difference measures the perturbation: {described}"))
        if row.get("equivalent"):
            declared = ", ".join(f"{k} {describe_value(v)}" for k, v in row["equivalent"].items())
            keys = sorted({str(d["key"]).split(".")[0] + "." + str(d["key"]).split(".")[1] for d in row.get("wrapper_differences") or []
                           if "." in str(d["key"])})
            lines.append(escape(f"run {row['run']}: the same episodes behind two wrappers, as both environments declare "
                                f"({declared}); they differ only in {', '.join(keys) or 'nothing else'}"))
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
