"""Load an experiment file: overrides, ``requires``, merging, validation, resolved runs.

Top-level keys are ``name``, ``requires``, ``launch``, ``tracking`` (result sinks,
:mod:`arena.sinks`), ``matrix`` (runs expanded over values, :mod:`arena.config.matrix`), ``perturbations`` (a
perturbation sweep, :mod:`arena.config.sweep`),
``shared`` and ``runs`` (required, a
non-empty mapping; run names match ``[A-Za-z_][A-Za-z0-9_-]*``, optionally followed by one
``.<suffix>``: the name of an expanded run), and in snapshots arena writes ``allow_imports``
(:mod:`arena.config.imports`: a ``package.module:Class`` type imports its module only when the
user allowed it). Run keys are ``environment``, ``policy``, ``environment_builder``,
``rollout_limit``, ``server`` and ``recording``.

**Expansion.** A run whose environment config's ``expand()`` returns ``{suffix: updates}``
(a LIBERO suite given without a task) is replaced, in place, by one run ``NAME.<suffix>`` per
entry, each resolved as if its ``environment`` section held ``updates``.
``runs.NAME.<key>=...`` overrides apply to all of them, ``runs.NAME.<suffix>.<key>=...`` to
one. The snapshot holds the expanded runs, so ``--dry-run``, ``--list-overrides``, the
manifest and ``arena run-one --run NAME.<suffix>`` see them.

Precedence, lowest first: field defaults < ``shared`` < ``shared.<path>=<value>`` overrides <
the run's own values < ``runs.<name>.<path>=<value>`` overrides. Mappings merge key by key;
any other value (a list included) replaces. ``launch.<path>=<value>`` overrides the file's
``launch`` section, ``perturbations.<path>=<value>`` its perturbation sweep (before the sweep
expands; ``null`` removes a key, :mod:`arena.config.sweep`).

**A different type drops the shared section.** When a run's ``environment.type`` (or
``policy.type``) differs from the one in ``shared`` (after overrides), none of ``shared``'s
fields of that section apply to that run: the run's own section is used alone, since the
other type's fields would not fit. A run without a ``type`` inherits ``shared``'s type and
fields.

Order of checks: the file's shape and the override tokens, then ``requires`` (so a missing
plugin is named, not reported as an unknown type), then ``launch``, then each run. Every
problem raises :class:`arena.errors.ConfigError` with the file, the run and the key path.
An environment class must declare ``success_key`` (:mod:`arena.envs.base`); one that does not
is refused here. After a run validates, its environment and policy configs' optional ``validate_run(run)``
hooks run (cross-section constraints; a ``ValueError`` becomes a ConfigError naming the run).
Resolving one run, step by step, is :mod:`arena.config.runs`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.config.imports import SNAPSHOT_KEY, ImportCheck, ImportPolicy
from arena.config.merge import deep_merge, get_path, leaves
from arena.config.models import LaunchConfig
from arena.config.overrides import Override, apply_overrides, parse_override
from arena.config.requires import check_requires as _check_requires
from arena.config.requires import normalize_requires
from arena.config.resolved import ResolvedExperiment, ResolvedRun
from arena.config.runs import RUN_KEYS, check_run_keys, resolve_run
from arena.config.tracking import parse_tracking
from arena.config.validation import validate_section
from arena.yaml_io import dump_yaml, read_yaml
from arena.errors import ConfigError, short_repr
from arena.fsutil import write_text_atomic

if TYPE_CHECKING:
    from arena.plugins import PluginManager

TOP_LEVEL_KEYS = ("name", "requires", "launch", "shared", "runs", "tracking", "matrix", "perturbations", SNAPSHOT_KEY)
RUN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)?")
_SUFFIX = re.compile(r"[A-Za-z0-9_-]+")
#: An experiment name becomes ``outputs/<name>/``, job names and lines of job scripts.
EXPERIMENT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")



def load_experiment(
    path: str | os.PathLike[str],
    overrides: Sequence[str] = (),
    *,
    manager: PluginManager | None = None,
    check_requires: bool = True,
    allow_imports: Sequence[str] = (),
    trust_snapshot: bool = False,
) -> ResolvedExperiment:
    """Read, override, check and resolve the experiment file at ``path``.

    ``overrides`` are ``KEY=VALUE`` tokens (see :mod:`arena.config.overrides`); ``manager``
    defaults to the process-wide plugin manager; ``check_requires=False`` skips the
    ``requires`` check (the configs are validated all the same). ``allow_imports``: modules
    a ``package.module:Class`` type may import (``--allow-import``; ``$ARENA_ALLOW_IMPORTS``
    adds to them); ``trust_snapshot``: the file is a snapshot arena wrote, whose own
    ``allow_imports`` list is honoured (:mod:`arena.config.imports`).

    Raises:
        ConfigError: anything wrong with the file, an override or a component config, or a
            type whose module is not allowed to be imported.
    """
    data = read_yaml(path)
    return load_experiment_dict(
        data,
        overrides,
        source=str(path),
        manager=manager,
        check_requires=check_requires,
        allow_imports=allow_imports,
        trust_snapshot=trust_snapshot,
    )


def load_experiment_dict(
    data: Any,
    overrides: Sequence[str] = (),
    *,
    source: str | None = None,
    manager: PluginManager | None = None,
    check_requires: bool = True,
    allow_imports: Sequence[str] = (),
    trust_snapshot: bool = False,
) -> ResolvedExperiment:
    """Resolve already parsed experiment data; ``source`` names its file in errors.

    The experiment's name is its optional top-level ``name`` (snapshots carry it), else the
    stem of ``source`` (``"experiment"`` without one).

    Raises:
        ConfigError: as :func:`load_experiment`.
    """
    if manager is None:
        from arena.plugins import get_plugin_manager

        manager = get_plugin_manager()
    if isinstance(overrides, str):
        overrides = [overrides]
    raw = _top_level(data, source)
    runs_raw = _runs(raw.get("runs"), source)
    parsed = [_expanded_target(parse_override(token, file=source)) for token in overrides]
    from arena.config.matrix import expand_matrix
    from arena.config.sweep import check_distinct, expand_sweep, refuse_matrix_overlap

    sweep_overrides = _scope(parsed, "perturbations")
    sweep_raw = _sweep_section(raw.get("perturbations"), sweep_overrides, source)
    with _noting_overrides(sweep_overrides):
        refuse_matrix_overlap(raw.get("matrix"), sweep_raw, runs_raw, source=source)
    runs_raw, parsed = expand_matrix(raw.get("matrix"), runs_raw, parsed, source=source)
    with _noting_overrides(sweep_overrides):
        runs_raw, parsed, sweeps = expand_sweep(sweep_raw, runs_raw, parsed, source=source)
    for override in parsed:
        if override.scope == "runs" and override.run not in runs_raw and _parent(override.run) not in runs_raw:
            raise ConfigError(
                f"override '{override.token}' names run '{override.run}', which is not in the experiment "
                f"(runs: {', '.join(runs_raw)}); overrides cannot add runs",
                file=source,
            )

    requires = normalize_requires(raw.get("requires"), source=source)
    if check_requires:
        _check_requires(requires, source=source, manager=manager)

    launch_raw = apply_overrides(_mapping(raw.get("launch"), source, "launch"), _scope(parsed, "launch"), file=source)
    launch = validate_section(
        LaunchConfig, launch_raw, file=source, run=None, key="launch", context={"manager": manager}
    )

    shared = apply_overrides(_mapping(raw.get("shared"), source, "shared"), _scope(parsed, "shared"), file=source)
    check_run_keys(shared, source=source, run=None, prefix="shared")

    listed = _allow_list(raw.get(SNAPSHOT_KEY), source)
    imports = ImportCheck(ImportPolicy.gather(allow_imports, snapshot=listed if trust_snapshot else ()), listed, trust_snapshot)
    tracking_raw = apply_overrides(_mapping(raw.get("tracking"), source, "tracking"), _scope(parsed, "tracking"), file=source)
    tracking = parse_tracking(tracking_raw, manager=manager, source=source, imports=imports)
    runs: dict[str, ResolvedRun] = {}
    owns: dict[str, Mapping[str, Any]] = {}
    for name, run_raw in runs_raw.items():
        own = _mapping(run_raw, source, None, run=name)
        run_overrides = [o for o in parsed if o.scope == "runs" and o.run == name]
        own = apply_overrides(own, run_overrides, file=source)
        owns[name] = own
        run = resolve_run(
            name,
            shared,
            own,
            source=source,
            manager=manager,
            overrides=run_overrides + _scope(parsed, "shared"),
            imports=imports,
        )
        for child_name, child in _expand(run, shared, own, parsed, source=source, manager=manager, imports=imports):
            if child_name in runs or (child_name != name and child_name in runs_raw):
                raise ConfigError(
                    f"run '{name}' expands into '{child_name}', which is already a run of the experiment",
                    file=source,
                    key=f"runs.{child_name}",
                )
            runs[child_name] = child
    with _noting_overrides(sweep_overrides):
        check_distinct(sweeps, runs, source=source)
    for override in parsed:
        if override.scope == "runs" and override.run not in runs and override.run not in runs_raw:
            raise ConfigError(
                f"override '{override.token}' names run '{override.run}', which run "
                f"'{_parent(override.run)}' does not expand into (runs: {', '.join(runs)})",
                file=source,
            )

    name = raw.get("name")
    if name is None:
        name = Path(source).stem if source else "experiment"
        if not EXPERIMENT_NAME.fullmatch(name):
            raise ConfigError(
                f"the experiment is named after its file, and {short_repr(name)} cannot name an output folder or "
                "enter a job script (letters, digits, '_', '.' or '-', not starting with '.' or '-'): rename the "
                "file or set a top-level `name:`",
                file=source,
                key="name",
            )
    elif not isinstance(name, str) or not EXPERIMENT_NAME.fullmatch(name):
        raise ConfigError(
            "name must be letters, digits, '_', '.' or '-', not starting with '.' or '-' (it names output folders "
            f"and enters job scripts); got {short_repr(name)}",
            file=source,
            key="name",
        )
    return ResolvedExperiment(
        name=name,
        source=source,
        requires=requires,
        launch=launch,  # type: ignore[arg-type]
        runs=runs,
        shared=shared,
        imports=list(dict.fromkeys(imports.used)),
        tracking=tracking,
        warnings=ineffective_overrides(_scope(parsed, "shared"), raw.get("shared") or {}, owns),
    )


def ineffective_overrides(overrides: Sequence[Override], shared: Any, owns: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One warning per ``shared.<path>=V`` override that changes no run: every run sets each
    of its keys itself (or its section has another ``type``, which drops ``shared``'s fields),
    so the value never applies — e.g. ``shared.environment={obs_type: pixels_agent_pos}`` on
    an experiment whose every run sets ``obs_type``. The warning names the override, the key
    and the runs that set it."""
    from arena.config.merge import has_path, leaves
    from arena.config.runs import COMPONENTS

    if not owns:
        return []
    out = []
    for override in overrides:
        value = override.value
        paths = [(*override.path, *p) for p, _ in leaves(value)] if isinstance(value, Mapping) and value else [override.path]
        shared_type = shared.get(override.path[0], {}).get("type") if isinstance(shared, Mapping) and isinstance(shared.get(override.path[0]), Mapping) else None
        if isinstance(value, Mapping) and len(override.path) == 1 and value.get("type"):
            shared_type = value["type"]

        def ignored(own: Mapping[str, Any], path: tuple[str, ...]) -> bool:
            section = own.get(path[0]) if isinstance(own, Mapping) else None
            if path[0] in COMPONENTS and isinstance(section, Mapping) and section.get("type") and shared_type and section["type"] != shared_type:
                return True  # another type: none of shared's fields of this section apply
            return has_path(own, path)

        if all(ignored(own, path) for own in owns.values() for path in paths):
            keys = ", ".join(".".join(p) for p in paths)
            out.append(f"override '{override.token}' changes nothing: every run sets {keys} itself "
                       f"(runs {', '.join(owns)}); override it per run, e.g. runs.{next(iter(owns))}.{'.'.join(paths[0])}=...")
    return out


def write_snapshot(experiment: ResolvedExperiment, path: str | os.PathLike[str]) -> None:
    """Write ``experiment.snapshot()`` as YAML to ``path`` (atomically; parents created)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f"# Resolved experiment '{experiment.name}' (from {experiment.source or 'data'}): every run fully\n"
        "# merged, defaults included. `arena run-one` executes runs of this file.\n"
        + dump_yaml(experiment.snapshot())
    )
    write_text_atomic(target, text, fsync=False)


def list_overrides(
    experiment: ResolvedExperiment | Mapping[str, Any], *, manager: PluginManager | None = None
) -> list[tuple[str, Any]]:
    """Every overridable key with its current value, for ``--list-overrides``.

    ``shared.<path>`` for each leaf of ``shared`` as written; ``runs.<name>.<path>`` for each
    leaf of each resolved run (defaults included); ``launch.<path>`` for ``backend``,
    ``watchdog`` and the options of the selected backend (and any other given). Raw data is
    resolved first (``requires`` is not checked).

    Raises:
        ConfigError: raw data that does not resolve.
    """
    if not isinstance(experiment, ResolvedExperiment):
        experiment = load_experiment_dict(dict(experiment), manager=manager, check_requires=False)
    out: list[tuple[str, Any]] = []
    out += [(".".join(("shared", *path)), value) for path, value in leaves(experiment.shared)]
    for name, run in experiment.runs.items():
        data = run.to_dict()
        # a sync run's snapshot leaves execution out (it changes nothing); its keys are still overridable
        data.setdefault("execution", run.execution.model_dump(mode="json"))
        out += [(".".join(("runs", name, *path)), value) for path, value in leaves(data)]
    launch = experiment.launch.model_dump(mode="json", by_alias=True)
    out += [(".".join(("launch", *path)), value) for path, value in leaves(launch)]
    return out


# -- the file's shape ---------------------------------------------------------------------------


def _top_level(data: Any, source: str | None) -> dict[str, Any]:
    expected = ", ".join(TOP_LEVEL_KEYS)
    if data is None:
        raise ConfigError(f"the experiment is empty; expected a mapping with keys {expected} (runs required)", file=source)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"expected a mapping with keys {expected}; got {type(data).__name__}", file=source
        )
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ConfigError(f"unknown top-level key '{key}'; expected one of: {expected}", file=source, key=str(key))
    return dict(data)


def _runs(runs: Any, source: str | None) -> dict[str, Any]:
    if runs is None:
        raise ConfigError(
            "missing or empty 'runs': expected a mapping of run name to run (environment, policy, ...)",
            file=source,
            key="runs",
        )
    if not isinstance(runs, Mapping):
        raise ConfigError(
            f"expected a mapping of run name to run; got {type(runs).__name__}", file=source, key="runs"
        )
    if not runs:
        raise ConfigError("'runs' is empty: an experiment needs at least one run", file=source, key="runs")
    for name in runs:
        if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
            raise ConfigError(
                f"invalid run name {short_repr(name)}: expected letters, digits, '_' or '-', not starting with a digit "
                f"or '-' ([A-Za-z_][A-Za-z0-9_-]*; an expanded run adds one '.<suffix>')",
                file=source,
                key=f"runs.{name}",
            )
    return dict(runs)


def _mapping(value: Any, source: str | None, key: str | None, *, run: str | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        what = f"'{key}'" if key else "a run"
        raise ConfigError(f"{what} must be a mapping; got {type(value).__name__} {short_repr(value)}", file=source, run=run, key=key)
    return dict(value)


def _scope(parsed: list[Override], scope: str) -> list[Override]:
    return [o for o in parsed if o.scope == scope]


def _sweep_section(section: Any, overrides: list[Override], source: str | None) -> Any:
    """The ``perturbations`` section with its ``perturbations.<path>=V`` overrides applied; a
    ``null`` value removes its key (``perturbations.factors.NAME=null`` drops a factor)."""
    if not overrides:
        return section
    out = apply_overrides(_mapping(section, source, "perturbations"), overrides, file=source)
    for override in overrides:
        if override.value is None:
            parent = get_path(out, override.path[:-1], None) if len(override.path) > 1 else out
            if isinstance(parent, dict):
                parent.pop(override.path[-1], None)
    return out


@contextlib.contextmanager
def _noting_overrides(overrides: list[Override]) -> Iterator[None]:
    """A ConfigError raised inside, at a key an override set, says so: `` (from override 'TOKEN')``."""
    from arena.config.sweep import KEYS as SWEEP_KEYS

    try:
        yield
    except ConfigError as exc:
        path = tuple((exc.key or "").split("."))[1:] if (exc.key or "").startswith("perturbations") else None
        hits = [] if path is None else [
            o for o in overrides
            if o.path[: len(path)] == path[: len(o.path)] and (path or o.path[0] not in SWEEP_KEYS)
        ]
        if not hits:
            raise
        raise ConfigError(f"{exc.message} (from override '{hits[-1].token}')", file=exc.file, run=exc.run, key=exc.key) from None


def _allow_list(value: Any, source: str | None) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"'{SNAPSHOT_KEY}' must be a list of module names; got {type(value).__name__}", file=source, key=SNAPSHOT_KEY
        )
    return list(value)


def _expanded_target(override: Override) -> Override:
    """``runs.NAME.SUFFIX.<key>=...`` targets the expanded run ``NAME.SUFFIX`` (run keys are known)."""
    if override.scope == "runs" and len(override.path) > 1 and override.path[0] not in RUN_KEYS:
        return dataclasses.replace(override, run=f"{override.run}.{override.path[0]}", path=override.path[1:])
    return override


def _parent(name: str | None) -> str | None:
    return name.split(".", 1)[0] if name else name


def _expand(
    run: ResolvedRun,
    shared: Mapping[str, Any],
    own: Mapping[str, Any],
    parsed: list[Override],
    *,
    source: str | None,
    manager: PluginManager,
    imports: ImportCheck,
) -> list[tuple[str, ResolvedRun]]:
    """``[(name, run)]``: the run itself, or the runs its environment config expands into."""
    try:
        parts = run.environment.expand()
    except ValueError as exc:
        raise ConfigError(str(exc), file=source, run=run.name, key="environment") from None
    if not parts:
        return [(run.name, run)]
    if "." in run.name:
        raise ConfigError(
            "an expanded run's environment expands again; give it the field that selects one variant",
            file=source,
            run=run.name,
            key="environment",
        )
    out: list[tuple[str, ResolvedRun]] = []
    for suffix, updates in parts.items():
        if not _SUFFIX.fullmatch(str(suffix)):
            raise ConfigError(f"environment expands into an invalid run suffix {short_repr(suffix)}", file=source, run=run.name)
        name = f"{run.name}.{suffix}"
        child_overrides = [o for o in parsed if o.scope == "runs" and o.run == name]
        child_own = apply_overrides(deep_merge(own, {"environment": dict(updates)}), child_overrides, file=source)
        overrides = child_overrides + [o for o in parsed if o.scope == "runs" and o.run == run.name] + _scope(parsed, "shared")
        child = resolve_run(name, shared, child_own, source=source, manager=manager, overrides=overrides, imports=imports)
        if child.environment.expand():
            raise ConfigError(
                f"expanded run '{name}' would expand again; its environment's expand() must return None "
                "once the updates it returned are applied",
                file=source,
                run=name,
                key="environment",
            )
        out.append((name, child))
    return out
