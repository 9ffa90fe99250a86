"""How plans and progress name things on a console: counts, lists of runs, commands.

A LIBERO suite is 40 runs: a dry-run or a warning that lists every one of them on one line is
900 characters nobody reads; ``40 runs (spatial.0 … long.9)`` says the same. These helpers keep each line short and each command pasteable;
:func:`fold_by_run` writes a message that every run of a suite repeats (the same missing
server image 40 times) once.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence

__all__ = ["command", "count", "fold_by_run", "run_list", "run_names", "some_runs"]

#: Lists of at most this many runs are written out whole.
LIST_WHOLE = 4


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 run``, ``2 runs``, ``0 runs`` (``plural`` for nouns that do not take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def run_names(names: Sequence[str], noun: str = "run") -> str:
    """``a, b, c`` for up to :data:`LIST_WHOLE` names, else ``40 runs (spatial.0 … long.9)``
    (the count, the first and the last, in the order given)."""
    names = list(names)
    if len(names) <= LIST_WHOLE:
        return ", ".join(names)
    return f"{count(len(names), noun)} ({names[0]} … {names[-1]})"


def run_list(names: Sequence[str]) -> str:
    """:func:`run_names` that says what they are: ``run a``, ``runs a, b``, ``40 runs (a … z)``."""
    names = list(names)
    text = run_names(names)
    return text if len(names) > LIST_WHOLE else f"{'run' if len(names) == 1 else 'runs'} {text}"


def command(argv: Sequence[str]) -> str:
    """``argv`` as a shell would need it pasted (``shlex.join``): ``bash -c 'cd /w && exec x'``."""
    return shlex.join(str(a) for a in argv)


#: Runs :func:`some_runs` names before "and N more".
SOME_SHOWN = 3


def some_runs(names: Sequence[str], shown: int = SOME_SHOWN) -> str:
    """``a, b, c and 37 more``: the first ``shown`` names, then how many others."""
    names = list(names)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def fold_by_run(items: Iterable[tuple[str | None, str]]) -> list[tuple[list[str], str]]:
    """``(run, message)`` pairs folded to one ``(runs, message)`` per distinct message, in the
    order first seen. A message that names its own run's keys (``runs.spatial.0.server.image``)
    is compared with ``runs.<run>.`` in their place and, when several runs share it, returned
    so; a message of one run only comes back as given. A pair without a run (``None``) keeps
    its message and contributes no name."""
    folded: dict[str, tuple[list[str], str]] = {}
    for run, message in items:
        text = message.replace(f"runs.{run}.", "runs.<run>.") if run is not None else message
        names, _ = folded.setdefault(text, ([], message))
        if run is not None and run not in names:
            names.append(run)
    return [(runs, generic if len(runs) > 1 else first) for generic, (runs, first) in folded.items()]
