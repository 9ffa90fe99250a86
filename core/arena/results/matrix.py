"""A matrix experiment's comparison: its runs laid out by the matrix's axes, one cell per run.

A ``matrix`` (:mod:`arena.config.matrix`) expands run ``eval`` into ``eval.<label>-<label>…``,
one run per combination of its axes' values. The snapshot (``experiment.yaml``) keeps the
expanded runs, not the ``matrix`` section, so the axes are read back from the runs themselves:
the children of one parent differ exactly in the keys the axes set. Leaf keys that split the
children the same way are one axis (a value that is a mapping sets several leaves); the axes
must form the full product (one run per combination), else the group is not read as a matrix.
Each axis is named by its key (``server.checkpoint``, ``environment.task``; a mapping's
common prefix, ``policy``) and each value by the label the run name carries (``s1000``,
``reach-v3``), recovered by splitting the suffix at ``-``; where that is ambiguous the value
itself is shown.

A group whose only axis is the environment's task is a suite (``By suite``), not a matrix; the
runs of delay and perturbation sweeps have their own sections. An axis over checkpoints (its
key names a checkpoint, model, path or step, and every label, or else every value, names a
distinct step: ``s1000``, ``step_1000``, ``ckpt-1000``, ``1000``, or a path with such a
segment, ``/ckpts/005000/pretrained_model``, ``ckpt_1000.npz``; ``pi05`` names none) is a *checkpoint series*:
the report draws success against that step, one line per combination of the other axes.
Every cell is one run's own rate with its 95 % Wilson interval and ``n``; no rate is pooled
over an axis's values.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Set as AbstractSet
from typing import Any

_STEP_WORDS = ("checkpoint", "ckpt", "step", "model", "pretrained", "path")
#: A label or path segment that names a step: ``1000``, ``s1000``, ``step_1000``, ``ckpt-1000``, ``005000``.
_STEP_NAME = re.compile(r"^(?:s|step|steps|global_step|ckpt|checkpoint|iter|it|epoch)?[_-]?(\d+)$", re.IGNORECASE)
_TASK_KEY = "environment.task"


def _leaves(data: Any, prefix: str = "") -> dict[str, str]:
    """Every leaf of ``data`` as ``dotted.path -> canonical JSON text`` (lists are leaves)."""
    if isinstance(data, Mapping):
        out: dict[str, str] = {}
        for key, value in data.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: json.dumps(data, sort_keys=True, default=str)}


def _common_prefix(paths: list[str]) -> str:
    parts = [p.split(".") for p in paths]
    common: list[str] = []
    for segment in zip(*parts):
        if len(set(segment)) != 1:
            break
        common.append(segment[0])
    return ".".join(common) or sorted(paths, key=lambda p: (p.count("."), p))[0]


def _solve(rest: dict[str, str], order: list[dict[str, int]]) -> list[dict[int, str]] | None:
    """Labels per class of each axis in ``order`` such that every run's suffix ``rest`` is the
    ``-``-joined labels of its classes (distinct labels within an axis), or ``None``."""
    classes = order[0]
    members: dict[int, list[str]] = {}
    for run, cls in classes.items():
        members.setdefault(cls, []).append(run)
    if len(order) == 1:
        labels = {cls: rest[runs[0]] for cls, runs in members.items()}
        ok = all(rest[r] == labels[cls] for cls, runs in members.items() for r in runs)
        return [labels] if ok and len(set(labels.values())) == len(labels) else None
    options: list[list[str]] = []
    for cls, runs in members.items():
        parts = rest[runs[0]].split("-")
        candidates = ["-".join(parts[:j]) for j in range(1, len(parts))]
        options.append([c for c in candidates if all(rest[r].startswith(c + "-") for r in runs)])
    for choice in itertools.islice(itertools.product(*options), 256):
        if len(set(choice)) != len(choice):
            continue
        labels = dict(zip(members, choice))
        remainder = {r: rest[r][len(labels[classes[r]]) + 1:] for r in rest}
        solved = _solve(remainder, order[1:])
        if solved is not None:
            return [labels, *solved]
    return None


def _step_of(text: str) -> int | None:
    """The step a label (``s1000``) or a path (``/ckpts/005000/pretrained_model``,
    ``ckpt_100.npz``: its last segment that names one) names, else ``None`` (``pi05`` names none)."""
    for segment in reversed(text.replace("\\", "/").split("/")):
        found = _STEP_NAME.match(segment.rsplit(".", 1)[0] if "." in segment else segment)
        if found:
            return int(found.group(1))
    return None


def _steps(key: str, paths: list[str], labels: list[str], values: list[str]) -> dict[str, int] | None:
    """``label -> training step`` for a checkpoint axis (module docstring), else ``None``."""
    if not any(word in text.lower() for text in [key, *paths] for word in _STEP_WORDS):
        return None
    for source in (labels, values):
        steps = [_step_of(text) for text in source]
        if None not in steps and len(set(steps)) == len(steps):
            return {label: int(step) for label, step in zip(labels, steps)}  # type: ignore[arg-type]
    return None


def _short(value_json: str) -> str:
    """A value as a label: text as it is, a path by its last two parts (``…/005000/pretrained_model``:
    the report names no local directory), anything else as JSON."""
    try:
        value = json.loads(value_json)
    except ValueError:
        return value_json
    if isinstance(value, str) and value.count("/") > 1:
        return "…/" + "/".join(value.rstrip("/").split("/")[-2:])
    return value if isinstance(value, str) else json.dumps(value)


def _axes_of(parent: str, children: list[str], snapshot_runs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The axes of ``parent``'s expansion, in the run name's order (module docstring), or
    ``None`` when the children do not form a matrix."""
    leaves = {child: _leaves(snapshot_runs.get(child) or {}) for child in children}
    paths = sorted(set().union(*leaves.values()))
    by_partition: dict[tuple[int, ...], list[str]] = {}
    for path in paths:
        seen: dict[str | None, int] = {}
        partition = tuple(seen.setdefault(leaves[c].get(path), len(seen)) for c in children)
        if len(seen) > 1:
            by_partition.setdefault(partition, []).append(path)
    if not by_partition:
        return None
    axes = []
    for partition, axis_paths in by_partition.items():
        key = _common_prefix(axis_paths)
        shown = min(axis_paths, key=lambda p: (p.count("."), p))
        axes.append({"key": key, "paths": axis_paths, "classes": dict(zip(children, partition)),
                     "values": {cls: _short(leaves[c].get(shown, "null")) for c, cls in zip(children, partition)}})
    count = 1
    for axis in axes:
        count *= len(set(axis["classes"].values()))
    combos = {tuple(axis["classes"][c] for axis in axes) for c in children}
    if count != len(children) or len(combos) != len(children):
        return None  # not one run per combination: a per-run override, not a matrix
    suffixes = {c: c[len(parent) + 1:] for c in children}
    for order in itertools.permutations(range(len(axes))):
        solved = _solve(suffixes, [axes[i]["classes"] for i in order])
        if solved is not None:
            axes = [{**axes[i], "labels_of": labels} for i, labels in zip(order, solved)]
            break
    else:
        axes = [{**axis, "labels_of": dict(axis["values"])} for axis in axes]
    out = []
    for axis in axes:
        order_of = sorted(set(axis["classes"].values()))  # classes are numbered in run order
        labels = [axis["labels_of"][cls] for cls in order_of]
        steps = _steps(axis["key"], axis["paths"], labels, [axis["values"][cls] for cls in order_of])
        if steps is not None:
            labels.sort(key=lambda label: steps[label])
        out.append({"key": axis["key"], "labels": labels, "steps": steps,
                    "of_run": {c: axis["labels_of"][cls] for c, cls in axis["classes"].items()}})
    return out


def _cell(name: str, run: Mapping[str, Any]) -> dict[str, Any]:
    counts = run.get("counts") or {}
    return {"run": name, "k": run.get("k"), "n": run.get("n"), "success_rate": run.get("success_rate"),
            "ci95": run.get("ci95"), "errors": counts.get("error", 0), "state": run.get("state"),
            "partial_note": run.get("partial_note")}


def _beside(runs: Mapping[str, Mapping[str, Any]], names: list[str], axes: list[dict[str, Any]], column: int | None,
            in_groups: set[str]) -> list[dict[str, Any]]:
    """Runs outside the matrix on its tasks (a baseline per task), one row per policy label:
    ``[{"label", "cells": {column label: cell}}]``. Only where the columns are the task axis,
    or the matrix has one axis and one task; a label with two runs on one task is left out."""
    if column is not None and axes[column]["key"] == _TASK_KEY:
        label_of_task = {runs[n].get("task"): axes[column]["of_run"][n] for n in names}
    elif column is None and len({runs[n].get("task") for n in names}) == 1:
        label_of_task = {runs[names[0]].get("task"): ""}
    else:
        return []
    if None in label_of_task or len(label_of_task) != len(set(label_of_task.values())):
        return []
    rows: dict[str, dict[str, Any]] = {}
    clashes: set[str] = set()
    for name, run in runs.items():
        if name in in_groups or run.get("task") not in label_of_task:
            continue
        label = str(run.get("policy_label") or name)
        col = label_of_task[run.get("task")]
        cells = rows.setdefault(label, {})
        if col in cells:
            clashes.add(label)
        cells[col] = _cell(name, run)
    return [{"label": label, "cells": cells} for label, cells in rows.items() if label not in clashes]


def matrices(runs: Mapping[str, Mapping[str, Any]], snapshot_runs: Mapping[str, Any],
             skip: AbstractSet[str] = frozenset()) -> list[dict[str, Any]]:
    """The experiment's matrices (module docstring), in run order. ``runs``: the runs of
    ``experiment_result.json``; ``snapshot_runs``: ``experiment.yaml``'s ``runs``; ``skip``: run
    names another section reads (delay and perturbation sweeps).

    Each is ``{"run": parent, "axes": [{"key", "labels", "steps"}], "rows": [labels of the row
    axes], "columns": [labels of the column axis], "row_axes": [int], "column_axis": int | None,
    "cells": {"<row label> | <column label>": cell}, "series": {"axis": int, "lines": {line label:
    [cell + "step"]}} | None}``; a cell is ``{run, k, n, success_rate, ci95, errors, state,
    partial_note}``, the run's own figures; ``"beside"``: runs outside the matrix on its tasks
    (:func:`_beside`), e.g. a zero-action baseline per task. The column axis is the axis with the fewest values
    (the later on a tie; none when there is one axis); the row axes are the others, in order, a
    checkpoint series' steps ascending.
    """
    children: dict[str, list[str]] = {}
    for name in runs:
        parent, dot, _ = name.partition(".")
        if dot and name not in skip and name in snapshot_runs:
            children.setdefault(parent, []).append(name)
    out = []
    for parent, names in children.items():
        if len(names) < 2:
            continue
        axes = _axes_of(parent, names, snapshot_runs)
        if axes is None or (len(axes) == 1 and axes[0]["key"] == _TASK_KEY):
            continue  # a suite's tasks: By suite
        column = None
        if len(axes) > 1:
            column = min(reversed(range(len(axes))), key=lambda i: len(axes[i]["labels"]))
            if axes[column]["steps"] is not None:  # steps read down the rows, as on the plot's x axis
                others = [i for i in range(len(axes)) if i != column]
                column = min(reversed(others), key=lambda i: len(axes[i]["labels"]))
        row_axes = [i for i in range(len(axes)) if i != column]
        rows = [" · ".join(combo) for combo in itertools.product(*(axes[i]["labels"] for i in row_axes))]
        cells = {}
        for name in names:
            row = " · ".join(axes[i]["of_run"][name] for i in row_axes)
            col = axes[column]["of_run"][name] if column is not None else ""
            cells[f"{row} | {col}"] = _cell(name, runs[name])
        series = None
        stepped = [i for i, axis in enumerate(axes) if axis["steps"] is not None]
        if len(stepped) == 1:
            s = stepped[0]
            lines: dict[str, list[dict[str, Any]]] = {}
            for name in names:
                line = " · ".join(axes[i]["of_run"][name] for i in range(len(axes)) if i != s) or parent
                lines.setdefault(line, []).append({**_cell(name, runs[name]), "step": axes[s]["steps"][axes[s]["of_run"][name]]})
            series = {"axis": s, "lines": {k: sorted(v, key=lambda c: c["step"]) for k, v in lines.items()}}
        beside = _beside(runs, names, axes, column, in_groups={n for ns in children.values() for n in ns} | set(skip))
        out.append({
            "run": parent, "beside": beside,
            "axes": [{k: axis[k] for k in ("key", "labels", "steps")} for axis in axes],
            "row_axes": row_axes, "column_axis": column, "rows": rows,
            "columns": axes[column]["labels"] if column is not None else [""],
            "cells": cells, "series": series,
        })
    return out
