"""The experiment's ``perturbations`` section: one run expanded into a perturbation sweep.

::

    perturbations:
      runs: [expert]                 # which runs expand (default: every run)
      design: one_at_a_time          # or full_factorial
      factors:                       # each a perturbation name (arena.envs.perturbations)
        image_noise: [10, 40]                          # levels; labels from the values
        camera_shift: {left: -0.1, right: 0.1}         # label: level

Run ``expert`` becomes, in its place, ``expert.nominal`` (no factor set) plus:

- ``one_at_a_time`` (the default): one run per factor level, every other factor nominal:
  ``expert.image_noise-10``, ``expert.image_noise-40``, ``expert.camera_shift-left``, …;
- ``full_factorial``: one run per combination of the factors' levels, each factor at nominal or
  one of its levels (``(L1 + 1) × (L2 + 1) × …`` runs, nominal included), named by the factors
  not at nominal joined by ``--`` (``expert.image_noise-10--camera_shift-left``);
- ``half_fraction``: for ``k >= 3`` factors of one level each, the half of the ``2^k`` design
  that holds the nominal run (the combinations perturbing an even number of factors; defining
  relation ``I = (-1)^k AB…K``): ``2^(k-1)`` runs whose main effects the logistic model
  estimates, each aliased with a ``(k-1)``-factor interaction (Box, Hunter & Hunter 2005, ch. 6).

Every expanded run keeps the run's seeds, so each is paired with ``expert.nominal`` episode by
episode (the attribution in :mod:`arena.results.attribution`). A level is set as
``environment.perturbations.<factor>``: the sweep wins over the run's own value (perturbations
the run sets itself apply to all its runs, nominal included). ``runs.expert.<key>=V`` overrides
apply to every expanded run; ``runs.expert.nominal.<key>=V`` to one. Labels follow the
``matrix``'s rules (:mod:`arena.config.matrix`).

**Every run of a sweep evaluates its own setting.** ``expert.nominal`` always runs, so a level
that leaves its factor where the nominal run has it (the perturbation's nominal value, e.g.
``image_noise: 0``, or the value the run sets itself) would run the nominal setting a second
time, and two levels equal once the environment has checked them (``[10, 10.0]``) would run
one setting twice: both are a :class:`~arena.errors.ConfigError` naming
``perturbations.factors.<factor>`` and the levels, not folded away, since the runs a user
listed should be the runs that happen (:func:`check_distinct`, after the runs resolve).

**Not with the matrix on the same run.** A run is expanded by the ``matrix`` or by the sweep,
not both: an expanded name carries one ``.suffix`` (``expert.nominal``), and the report pairs
each level with ``<run>.nominal`` and groups runs by the part before the ``.``, which a
``eval.s1000.image_noise-10`` would break. A run in both is refused, naming
``perturbations.runs`` (:func:`refuse_matrix_overlap`); the matrix and the sweep may expand
different runs of one experiment. A run that expands itself (a LIBERO suite) cannot be swept.

**Overrides.** ``perturbations.<path>=V`` on the command line sets the section like
``shared.<path>=V`` sets ``shared`` (:mod:`arena.config.overrides`):
``perturbations.factors.image_noise=[0.1,0.2]``, ``perturbations.design=full_factorial``,
``perturbations.runs=[expert]``; ``=null`` removes the key (``perturbations.factors.NAME=null``
drops a factor, ``perturbations.runs=null`` sweeps every run). Errors in the section then name
the override that set the value.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from arena.config.matrix import _label, expand_runs
from arena.config.overrides import Override
from arena.errors import ConfigError

if TYPE_CHECKING:
    from arena.config.resolved import ResolvedRun

#: ``{parent: [(child, {factor: (label, level)})]}``: the runs a sweep made, the nominal first.
Groups = dict[str, list[tuple[str, dict[str, tuple[str, Any]]]]]

#: The suffix of a sweep's unperturbed run.
NOMINAL = "nominal"
DESIGNS = ("one_at_a_time", "full_factorial", "half_fraction")
#: The keys the section may hold.
KEYS = ("runs", "design", "factors")


def _factors(section: Mapping[str, Any], source: str | None) -> list[tuple[str, list[tuple[str, Any]]]]:
    factors = section.get("factors")
    if not isinstance(factors, Mapping) or not factors:
        raise ConfigError("perturbations.factors must map perturbation names to their levels", file=source,
                          key="perturbations.factors")
    out = []
    for name, levels in factors.items():
        where = f"perturbations.factors.{name}"
        if isinstance(levels, Mapping):
            pairs = [(_label(label), value) for label, value in levels.items()]
        elif isinstance(levels, list):
            pairs = [(_label(value), value) for value in levels]
        else:
            raise ConfigError("levels must be a list or a mapping of labels to levels", file=source, key=where)
        if not pairs:
            raise ConfigError("a factor needs at least one level", file=source, key=where)
        labels = [label for label, _ in pairs]
        if len(set(labels)) != len(labels):
            raise ConfigError(f"two levels get the same label ({', '.join(labels)}): give them as {{label: level}}",
                              file=source, key=where)
        if "--" in "".join(labels) or NOMINAL in labels:
            raise ConfigError(f"labels may not contain '--' nor be '{NOMINAL}'", file=source, key=where)
        out.append((str(name), pairs))
    return out


def combinations(factors: list[tuple[str, list[tuple[str, Any]]]], design: str) -> list[tuple[str, dict[str, tuple[str, Any]]]]:
    """``[(suffix, {factor: (label, level)})]`` of a design, the nominal run (``{}``) first."""
    out: list[tuple[str, dict[str, tuple[str, Any]]]] = [(NOMINAL, {})]
    if design == "one_at_a_time":
        for name, pairs in factors:
            out += [(f"{name}-{pair[0]}", {name: pair}) for pair in pairs]
        return out
    options = [[None, *pairs] for _, pairs in factors]
    for combo in itertools.product(*options):
        chosen = [(name, pair) for (name, _), pair in zip(factors, combo) if pair is not None]
        if design == "half_fraction" and len(chosen) % 2:
            continue  # the half of the 2^k design holding nominal: an even number of factors perturbed
        if chosen:
            out.append(("--".join(f"{name}-{label}" for name, (label, _) in chosen), dict(chosen)))
    return out


def expand_sweep(
    section: Any, runs: dict[str, Any], overrides: list[Override], *, source: str | None
) -> tuple[dict[str, Any], list[Override], Groups]:
    """``runs`` with the sweep's runs expanded in place (module docstring), ``overrides``
    with each ``runs.<parent>.<key>=V`` repeated for every expanded run, and the runs each
    swept run became (:data:`Groups`, for :func:`check_distinct`).

    Raises:
        ConfigError: a malformed section, a run it names that does not exist or already has a
            ``.suffix``, or an expanded name that is already a run; naming the key.
    """
    if section is None:
        return runs, overrides, {}
    if not isinstance(section, Mapping) or set(section) - set(KEYS):
        extra = f"; got {', '.join(map(str, set(section) - set(KEYS)))}" if isinstance(section, Mapping) else ""
        raise ConfigError(f"perturbations holds `factors` and optionally `runs` and `design`{extra}", file=source,
                          key="perturbations")
    design = section.get("design", "one_at_a_time")
    if design not in DESIGNS:
        raise ConfigError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}", file=source,
                          key="perturbations.design")
    factors = _factors(section, source)
    if design == "half_fraction" and (len(factors) < 3 or any(len(pairs) != 1 for _, pairs in factors)):
        raise ConfigError("half_fraction takes three or more factors of one level each (a 2^(k-1) design)",
                          file=source, key="perturbations.design")
    combos = combinations(factors, design)
    variants = [
        (suffix, [(("environment", "perturbations", factor), value) for factor, (_, value) in levels.items()])
        for suffix, levels in combos
    ]
    out, fanned = expand_runs(runs, overrides, section, variants, source=source, key="perturbations",
                              dotted="(a matrix expanded it) and cannot be swept", expander="the sweep")
    parents = [name for name in runs if name not in out]
    return out, fanned, {parent: [(f"{parent}.{suffix}", levels) for suffix, levels in combos] for parent in parents}


def refuse_matrix_overlap(matrix: Any, section: Any, runs: Mapping[str, Any], *, source: str | None) -> None:
    """Refuse a run that both the ``matrix`` and the sweep expand (module docstring); sections
    too malformed to tell are left to their own checks.

    Raises:
        ConfigError: naming ``perturbations.runs`` and the runs in both.
    """
    if not isinstance(matrix, Mapping) or not isinstance(section, Mapping):
        return
    by_matrix, swept = matrix.get("runs", list(runs)), section.get("runs")
    if not isinstance(by_matrix, list) or not isinstance(swept if swept is not None else [], list):
        return
    both = [name for name in (swept if swept is not None else runs) if name in by_matrix]
    if both:
        default = "" if swept is not None else " (without `runs` the sweep takes every run)"
        raise ConfigError(
            f"run(s) {', '.join(map(str, both))} are expanded by both `matrix` and `perturbations`{default}: a run is "
            "expanded by one of them (its runs are named <run>.<suffix>, and the report pairs each level with "
            "<run>.nominal); list in perturbations.runs the runs to sweep, or give the matrix value you want swept "
            "a run of its own and sweep that",
            file=source, key="perturbations.runs")


def check_distinct(groups: Groups, runs: Mapping[str, ResolvedRun], *, source: str | None) -> None:
    """Each sweep's runs perturb the environment differently once resolved: the environment
    normalizes each level and drops nominal values (:func:`arena.envs.perturbations.active_values`),
    so a level at the nominal run's value, or two equal levels, would run one setting twice.

    Raises:
        ConfigError: naming ``perturbations.factors.<factor>``, the runs and the levels that coincide.
    """
    from arena.envs.perturbations import active_values, declared

    for parent, children in groups.items():
        seen: dict[str, tuple[str, dict[str, tuple[str, Any]], dict[str, Any]]] = {}
        for child, levels in children:
            run = runs.get(child)
            if run is None:
                continue
            active = active_values(run.environment_cls, run.environment)
            setting = repr(sorted(active.items()))
            if setting not in seen:
                seen[setting] = (child, levels, active)
                continue
            other, other_levels, _ = seen[setting]
            factor = next(f for f in {**other_levels, **levels} if levels.get(f) != other_levels.get(f))
            if factor in levels and factor in other_levels:
                (first, first_value), (label, value) = other_levels[factor], levels[factor]
                raise ConfigError(
                    f"levels {first!r} ({first_value!r}) and {label!r} ({value!r}) are the same setting once checked "
                    f"by the environment, so '{other}' and '{child}' would run it twice: keep one",
                    file=source, key=f"perturbations.factors.{factor}")
            # one of the two runs sets a level that leaves the factor where the other run has it
            (label, value), redundant, plain = ((levels[factor], child, other) if factor in levels
                                                else (other_levels[factor], other, child))
            base = active.get(factor, declared(run.environment_cls, run.environment)[factor].nominal)
            note = " (the run the sweep always makes, without the factors)" if plain == f"{parent}.{NOMINAL}" else ""
            raise ConfigError(
                f"level {label!r} ({value!r}) leaves {factor} at {base!r}, its value in '{plain}'{note}, so "
                f"'{redundant}' would repeat that run: drop the level", file=source, key=f"perturbations.factors.{factor}")
