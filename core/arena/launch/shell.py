"""Quoting for the shell scripts launch backends generate (Slurm jobs, OSMO task scripts).

Every value that enters a generated script goes through one of these, so a name, a path or
an option can never end a line or expand into a command:

- :func:`shlex.quote` for a whole shell word;
- :func:`in_double_quotes` for text placed inside ``"..."`` (messages that also expand
  ``$VARIABLES`` of the script);
- :func:`one_line` for the text of a ``# ...`` comment.
"""

from __future__ import annotations

import re

#: What a backslash must escape inside a double-quoted shell string.
DOUBLE_QUOTE_SPECIAL = re.compile(r'([\\"$`])')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(value: object) -> str:
    """``value`` with every control character (a line break ends a comment and starts a
    command) replaced by ``?``."""
    return _CONTROL.sub("?", str(value))


def in_double_quotes(value: object) -> str:
    """``value`` on one line, escaped for the inside of a double-quoted shell string: ``$``,
    backticks, ``"`` and ``\\`` lose their meaning."""
    return DOUBLE_QUOTE_SPECIAL.sub(r"\\\1", one_line(value))
