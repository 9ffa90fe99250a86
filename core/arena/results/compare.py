"""``arena compare A B``: two experiments (output directories), run by run.

Runs are matched by name. For each pair: both success rates as k/n, the difference
``B - A`` with its 95 % Newcombe hybrid score interval (Newcombe 1998, method 10; never the
difference of two Wilson intervals), whether that interval excludes 0, and — when both
played some of the same seeds — the outcome pairs on those seeds (``only_a``/``only_b``:
seeds only one side solved; a paired view that seeds recorded per episode make possible).
Runs present on one side only are listed as such.

Only like runs are compared. Two runs of one name must agree on the environment (type,
task and every other environment field), the episode seeds (``environment_builder.seed``
and ``rollout_limit.num_episodes``) and the rollout limits, read from each directory's
snapshot (``experiment.yaml``; ``manifest.json`` for what it holds when there is none).
Where they differ, :func:`compare_experiments` lists the differences and the CLI refuses
(exit 2) unless ``--force``. The policy may differ: that is what is being compared; when two
runs of the same policy type were served by different models (checkpoint, revision, image,
server metadata), the row says so (``models_differ``).

Runs whose numbers cover less than planned (cancelled, failed, still running, episodes
missing or error episodes) are marked (``partial_a`` / ``partial_b``); the CLI exits 3 when
any compared run is partial.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.outputs.layout import EXPERIMENT_FILE, MANIFEST_FILE, read_snapshot
from arena.results.aggregate import build_experiment_result, collect_run_records, compare_runs, models_differ

#: Run settings (snapshot paths) that must agree for two success rates to be comparable.
#: ``environment.*`` covers the type, the task and every other environment field.
SETUP_PREFIXES = ("environment.", "rollout_limit.")


def compare_experiments(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> dict[str, Any]:
    """Compare output directories ``a`` and ``b``.

    Returns ``{"a": {experiment, path}, "b": {…}, "same_directory": bool, "runs": [row…],
    "only_a": [names], "only_b": [names], "differences": {run: [{key, a, b}…]},
    "partial": [{run, side, note}…]}``; a row holds ``run``, ``task``,
    ``policy_a``/``policy_b``, ``k_a``/``n_a``/``rate_a``/``errors_a``/``state_a``/
    ``partial_a`` (and ``_b``), ``difference`` (B − A), ``ci95``, ``significant``,
    ``paired``, ``setup_differences`` and ``models_differ`` (a list of what differs, or
    ``None``). Nothing is written into either directory.

    Raises:
        FileNotFoundError: a directory does not exist.
    """
    a, b = Path(a), Path(b)
    for path in (a, b):
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a directory")
    result_a = build_experiment_result(a, write=False)
    result_b = build_experiment_result(b, write=False)
    setups_a, setups_b = _setups(a, result_a), _setups(b, result_b)
    rows = []
    differences: dict[str, list[dict[str, Any]]] = {}
    partial: list[dict[str, str]] = []
    for name, run_a in result_a["runs"].items():
        run_b = result_b["runs"].get(name)
        if run_b is None:
            continue
        # B - A: compare_runs computes first - second, so B goes first.
        row = compare_runs(name, run_b, name, run_a, collect_run_records(b / name), collect_run_records(a / name))
        paired = row["paired"]
        if paired is not None:  # flip the labels back to A/B
            paired = {**paired, "only_a": paired["only_b"], "only_b": paired["only_a"]}
        setup = setup_differences(setups_a.get(name), setups_b.get(name))
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
                "paired": paired,
                "setup_differences": setup,
                "models_differ": models_differ(run_a, run_b),
            }
        )
    return {
        "a": {"experiment": result_a["experiment"], "path": str(a)},
        "b": {"experiment": result_b["experiment"], "path": str(b)},
        "same_directory": a.resolve() == b.resolve(),
        "runs": rows,
        "only_a": [n for n in result_a["runs"] if n not in result_b["runs"]],
        "only_b": [n for n in result_b["runs"] if n not in result_a["runs"]],
        "differences": differences,
        "partial": partial,
    }


Setup = tuple[str, dict[str, Any]]


def run_setup(snapshot_run: dict[str, Any] | None, manifest_entry: dict[str, Any] | None) -> Setup | None:
    """``(source, {key path: value})`` of what makes a run comparable (see :data:`SETUP_PREFIXES`).

    From the run's section of the snapshot (source ``"experiment.yaml"``) when there is one,
    else from its manifest entry (``"manifest.json"``: task, seed, number of episodes);
    ``None`` when neither is known.
    """
    if isinstance(snapshot_run, dict):
        from arena.config.merge import leaves

        flat: dict[str, Any] = {}
        for section in ("environment", "rollout_limit"):
            value = snapshot_run.get(section)
            for path, leaf in leaves(value if isinstance(value, dict) else {}):
                flat[".".join((section, *path))] = leaf
        builder = snapshot_run.get("environment_builder")
        flat["environment_builder.seed"] = builder.get("seed") if isinstance(builder, dict) else None
        return EXPERIMENT_FILE, flat
    if isinstance(manifest_entry, dict):
        return MANIFEST_FILE, {
            "environment.task": manifest_entry.get("task"),
            "environment_builder.seed": manifest_entry.get("seed"),
            "rollout_limit.num_episodes": manifest_entry.get("num_episodes"),
        }
    return None


def setup_differences(a: Setup | None, b: Setup | None) -> list[dict[str, Any]]:
    """``[{key, a, b}]`` where two runs' setups disagree.

    Settings from different sources (a snapshot against a bare manifest) are compared on the
    keys both know; an unknown setup is itself a difference (nothing can be checked).
    """
    if a is None or b is None:
        return [{"key": "settings", "a": "known" if a else "unknown (no experiment.yaml or manifest.json)",
                 "b": "known" if b else "unknown (no experiment.yaml or manifest.json)"}]
    (source_a, flat_a), (source_b, flat_b) = a, b
    keys = sorted(set(flat_a) | set(flat_b)) if source_a == source_b else sorted(set(flat_a) & set(flat_b))
    return [{"key": k, "a": flat_a.get(k), "b": flat_b.get(k)} for k in keys if flat_a.get(k) != flat_b.get(k)]


def _setups(output_dir: Path, result: dict[str, Any]) -> dict[str, Setup | None]:
    from arena.outputs.records import read_json

    snapshot = read_snapshot(output_dir)
    snapshot_runs = snapshot.get("runs") if isinstance(snapshot, dict) else None
    manifest = read_json(output_dir / MANIFEST_FILE)
    manifest_runs = manifest.get("runs") if isinstance(manifest, dict) else None
    return {
        name: run_setup(
            snapshot_runs.get(name) if isinstance(snapshot_runs, dict) else None,
            manifest_runs.get(name) if isinstance(manifest_runs, dict) else None,
        )
        for name in result["runs"]
    }


def describe_value(value: Any, limit: int = 80) -> str:
    """A short printable form of a setting's value (``null`` for None, strings unquoted)."""
    from arena.errors import short_repr

    if value is None or isinstance(value, (bool, int, float)):
        import json

        return json.dumps(value)  # as YAML and JSON spell it: null, true, 100
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    return short_repr(value, limit)
