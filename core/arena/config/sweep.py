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
``matrix``'s rules (:mod:`arena.config.matrix`). Names already carry their one ``.suffix``: a run
cannot be both in the ``matrix`` and in the sweep, nor expand itself (a LIBERO suite).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from arena.config.matrix import _label, expand_runs
from arena.config.overrides import Override
from arena.errors import ConfigError

#: The suffix of a sweep's unperturbed run.
NOMINAL = "nominal"
DESIGNS = ("one_at_a_time", "full_factorial", "half_fraction")
_KEYS = {"runs", "design", "factors"}


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


def combinations(factors: list[tuple[str, list[tuple[str, Any]]]], design: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(suffix, {factor: level})]`` of a design, the nominal run (``{}``) first."""
    out: list[tuple[str, dict[str, Any]]] = [(NOMINAL, {})]
    if design == "one_at_a_time":
        for name, pairs in factors:
            out += [(f"{name}-{label}", {name: value}) for label, value in pairs]
        return out
    options = [[None, *pairs] for _, pairs in factors]
    for combo in itertools.product(*options):
        chosen = [(name, pair) for (name, _), pair in zip(factors, combo) if pair is not None]
        if design == "half_fraction" and len(chosen) % 2:
            continue  # the half of the 2^k design holding nominal: an even number of factors perturbed
        if chosen:
            out.append(("--".join(f"{name}-{label}" for name, (label, _) in chosen),
                        {name: value for name, (_, value) in chosen}))
    return out


def expand_sweep(
    section: Any, runs: dict[str, Any], overrides: list[Override], *, source: str | None
) -> tuple[dict[str, Any], list[Override]]:
    """``runs`` with the sweep's runs expanded in place (module docstring), and ``overrides``
    with each ``runs.<parent>.<key>=V`` repeated for every expanded run.

    Raises:
        ConfigError: a malformed section, a run it names that does not exist or already has a
            ``.suffix``, or an expanded name that is already a run; naming the key.
    """
    if section is None:
        return runs, overrides
    if not isinstance(section, Mapping) or set(section) - _KEYS:
        raise ConfigError("perturbations holds `factors` and optionally `runs` and `design`", file=source,
                          key="perturbations")
    design = section.get("design", "one_at_a_time")
    if design not in DESIGNS:
        raise ConfigError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}", file=source,
                          key="perturbations.design")
    factors = _factors(section, source)
    if design == "half_fraction" and (len(factors) < 3 or any(len(pairs) != 1 for _, pairs in factors)):
        raise ConfigError("half_fraction takes three or more factors of one level each (a 2^(k-1) design)",
                          file=source, key="perturbations.design")
    variants = [
        (suffix, [(("environment", "perturbations", factor), value) for factor, value in levels.items()])
        for suffix, levels in combinations(factors, design)
    ]
    return expand_runs(runs, overrides, section, variants, source=source, key="perturbations",
                       dotted="(a matrix expanded it) and cannot be swept", expander="the sweep")
