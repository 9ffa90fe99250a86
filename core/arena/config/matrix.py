"""The experiment's ``matrix`` section: runs expanded over lists of values (a sweep).

::

    matrix:
      runs: [eval]                       # which runs expand (default: every run)
      axes:                              # in order; each sets one run-relative key
        ckpt:
          key: server.checkpoint
          values: {s1000: /ckpts/1000, s2000: /ckpts/2000}   # label: value
        task:
          key: environment.task
          values: [reach-v3, push-v3]                        # labels from the values

Run ``eval`` becomes, in its place, one run per combination, named ``eval.<label>-<label>…``
in axis order (``eval.s1000-reach-v3``, ``eval.s1000-push-v3``, ``eval.s2000-reach-v3``, …):
stable (the labels, not positions) and readable. A label is the mapping key, or the value
with every character but letters, digits, ``_`` and ``-`` replaced by ``_``. Each expanded run
is the run's own mapping with the axes' keys set (the matrix wins over the run's value;
``runs.eval.s1000-push-v3.<key>=V`` overrides still win over the matrix, and
``runs.eval.<key>=V`` applies to every expanded run). The report opens with them laid out by
the axes, one cell per run (:mod:`arena.results.matrix`), never as a suite pooling them. Runs that differ only in the axes that do not
reach the server share one policy server: a checkpoint × task sweep starts one server per
checkpoint (``arena run --dry-run`` shows them).

Expanded names already carry their one ``.suffix``: a run whose environment expands itself
(a LIBERO suite without a task) cannot be in a matrix; sweep its tasks with an axis on
``environment.task`` instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from arena.config.merge import set_path
from arena.config.overrides import Override
from arena.errors import ConfigError

_LABEL = re.compile(r"[^A-Za-z0-9_-]")


def _label(value: Any) -> str:
    return _LABEL.sub("_", str(value)) or "_"


def _axes(matrix: Mapping[str, Any], source: str | None) -> list[tuple[str, tuple[str, ...], list[tuple[str, Any]]]]:
    axes = matrix.get("axes")
    if not isinstance(axes, Mapping) or not axes:
        raise ConfigError("matrix.axes must be a non-empty mapping of axis names to {key, values}", file=source, key="matrix.axes")
    out = []
    for name, axis in axes.items():
        where = f"matrix.axes.{name}"
        if not isinstance(axis, Mapping) or set(axis) - {"key", "values"} or "key" not in axis or "values" not in axis:
            raise ConfigError("an axis is {key: run-relative.path, values: [..] or {label: value}}", file=source, key=where)
        key, values = axis["key"], axis["values"]
        if not isinstance(key, str) or not key or any(not p for p in key.split(".")):
            raise ConfigError(f"key must be a dotted path inside a run (e.g. server.checkpoint), got {key!r}", file=source, key=f"{where}.key")
        if isinstance(values, Mapping):
            pairs = [(_label(label), value) for label, value in values.items()]
        elif isinstance(values, list):
            pairs = [(_label(value), value) for value in values]
        else:
            raise ConfigError("values must be a list or a mapping of labels to values", file=source, key=f"{where}.values")
        if not pairs:
            raise ConfigError("values must not be empty", file=source, key=f"{where}.values")
        labels = [label for label, _ in pairs]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"two values get the same label ({', '.join(labels)}): give them as {{label: value}}", file=source, key=f"{where}.values")
        out.append((str(name), tuple(key.split(".")), pairs))
    return out


def expand_matrix(
    matrix: Any, runs: dict[str, Any], overrides: list[Override], *, source: str | None
) -> tuple[dict[str, Any], list[Override]]:
    """``runs`` with the matrix's runs expanded in place, and ``overrides`` with each
    ``runs.<parent>.<key>=V`` repeated for every expanded run.

    Raises:
        ConfigError: a malformed section, a run it names that does not exist, or an expanded
            name that is already a run; naming the key.
    """
    if matrix is None:
        return runs, overrides
    if not isinstance(matrix, Mapping) or set(matrix) - {"runs", "axes"}:
        raise ConfigError("matrix holds `axes` and optionally `runs`", file=source, key="matrix")
    axes = _axes(matrix, source)
    variants = [
        ("-".join(label for label, _ in combo), [(path, value) for (_, path, _), (_, value) in zip(axes, combo)])
        for combo in itertools.product(*(pairs for _, _, pairs in axes))
    ]
    return expand_runs(runs, overrides, matrix, variants, source=source, key="matrix",
                       dotted="and cannot be expanded by the matrix", expander="the matrix")


def expand_runs(
    runs: dict[str, Any], overrides: Sequence[Override], section: Mapping[str, Any],
    variants: Sequence[tuple[str, Sequence[tuple[tuple[str, ...], Any]]]], *,
    source: str | None, key: str, dotted: str, expander: str,
) -> tuple[dict[str, Any], list[Override]]:
    """Each run ``section["runs"]`` names (default: every run) replaced in place by one run per
    variant ``(suffix, [(path, value)…])``, named ``<run>.<suffix>`` and set at each ``path``;
    ``overrides`` fanned out to them (:func:`fan_out_overrides`). The matrix and perturbation
    sweeps expand runs through it. ``key``: the section's key (``matrix``), ``dotted``: why a run
    already expanded (``name.suffix``) cannot be, ``expander``: who expands, for the errors.

    Raises:
        ConfigError: ``runs`` names a run that does not exist or one already expanded, or an
            expanded name is already a run; naming the key.
    """
    chosen = section.get("runs", list(runs))
    if not isinstance(chosen, list) or any(name not in runs for name in chosen):
        raise ConfigError(f"{key}.runs must list runs of the experiment (runs: {', '.join(runs)})", file=source,
                          key=f"{key}.runs")
    out: dict[str, Any] = {}
    children: dict[str, list[str]] = {}
    for name, body in runs.items():
        if name not in chosen:
            out[name] = body
            continue
        if "." in name:
            raise ConfigError(f"run '{name}' already has a '.suffix' {dotted}", file=source, key=f"{key}.runs")
        for suffix, settings in variants:
            child = f"{name}.{suffix}"
            data = dict(body or {}) if isinstance(body, Mapping) else body
            if isinstance(data, dict):
                for path, value in settings:
                    data = set_path(data, path, value)
            if child in runs or child in out:
                raise ConfigError(f"{expander} expands run '{name}' into '{child}', which is already a run", file=source,
                                  key=key)
            out[child] = data
            children.setdefault(name, []).append(child)
    return out, fan_out_overrides(overrides, children)


def fan_out_overrides(overrides: Sequence[Override], children: Mapping[str, list[str]]) -> list[Override]:
    """``runs.<name>.…`` overrides of a run that expanded, repeated for each of its ``children``
    (matrix and perturbation sweeps expand runs the same way); other overrides as they are."""
    expanded: list[Override] = []
    for override in overrides:
        if override.scope == "runs" and override.run in children:
            expanded += [dataclasses.replace(override, run=child) for child in children[override.run]]
        else:
            expanded.append(override)
    return expanded
