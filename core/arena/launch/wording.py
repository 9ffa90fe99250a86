"""How plans and progress name things on a console: counts, lists of runs, commands.

A LIBERO suite is 40 runs: a dry-run or a warning that lists every one of them on one line is
900 characters nobody reads; ``40 runs (spatial.0 … long.9)`` says the same. These helpers keep each line short and each command pasteable.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

__all__ = ["command", "count", "run_list", "run_names"]

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
