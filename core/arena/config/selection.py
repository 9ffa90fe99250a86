"""``arena run --run NAME``: which of an experiment's runs one invocation runs.

A selector is, tried in this order:

- a run's name (``learned``, ``eval.s1000-reach-v3``);
- the name of a run that expanded (a ``matrix`` run, a perturbation sweep, a LIBERO suite):
  ``eval`` selects every ``eval.<suffix>`` (the report's "By suite" groups them the same way);
- a shell-style glob (``*``, ``?``, ``[..]``, matched with :func:`fnmatch.fnmatchcase` against
  the whole name): ``'eval.s1000-*'``, ``'ckpt_*'``.

Selection happens once, on the resolved experiment, before the servers are planned and the
backend is chosen: :func:`select_runs` gives the names, ``dataclasses.replace(experiment,
runs=...)`` the experiment a backend launches. The snapshot and the manifest still describe
every run, so ``arena run --resume OUTPUT_DIR`` later runs the ones left out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from arena.errors import ConfigError

_GLOB = frozenset("*?[")


def matching_runs(names: Sequence[str], selector: str) -> list[str]:
    """The names of ``names`` that ``selector`` selects (see the module), in their order."""
    if selector in names:
        return [selector]
    children = [name for name in names if name.startswith(selector + ".")]
    if children:
        return children
    if _GLOB & set(selector):
        return [name for name in names if fnmatch.fnmatchcase(name, selector)]
    return []


def select_runs(names: Iterable[str], selectors: Sequence[str], *, source: str | None = None) -> list[str]:
    """The runs of ``names`` (an experiment's, in order) that any of ``selectors`` selects, in
    the experiment's order, each once.

    Raises:
        ConfigError: no selector given, or a selector that selects no run; the message names
            ``source`` (the experiment file) and lists every run name.
    """
    names = list(names)
    chosen: set[str] = set()
    unknown: list[str] = []
    for selector in selectors:
        found = matching_runs(names, selector)
        if not found:
            unknown.append(selector)
        chosen.update(found)
    if unknown or not selectors:
        what = ", ".join(f"'{s}'" for s in unknown) if unknown else "nothing"
        raise ConfigError(
            f"--run {what} selects no run of the experiment; its runs are: {', '.join(names) or 'none'} "
            "(a NAME, the NAME of a run that expanded into NAME.<suffix> runs, or a glob such as 'NAME.*')",
            file=source,
        )
    return [name for name in names if name in chosen]
