"""Quoting for the shell scripts launch backends generate (Slurm jobs, OSMO task scripts).

Every value that enters a generated script goes through one of these, so a name, a path or
an option can never end a line or expand into a command:

- :func:`shlex.quote` for a whole shell word;
- :func:`in_double_quotes` for text placed inside ``"..."`` (messages that also expand
  ``$VARIABLES`` of the script);
- :func:`one_line` for the text of a ``# ...`` comment.

:func:`require_command` writes the check a job script makes before it starts anything: that
the command it is about to call exists on the node.
"""

from __future__ import annotations

import json
import re
import shlex

from arena.outputs.layout import STATUS_FILE

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


#: The comment that opens :func:`require_command`'s lines (tests find the block by it).
MISSING_CHECK_MARK = "arena on the node"
#: Exit status of a job script whose command is missing (bash's own for "command not found").
COMMAND_MISSING_EXIT = 127


def command_missing_error(command: str, fix: str) -> str:
    """The reason a run records when ``command`` is not on the node: names it and ``fix``."""
    return f"`{command}` is not a command on the node (`command -v {command}` found nothing on its PATH): {fix}"


def require_command(command: str, *, work_dir: str, run: str, fix: str) -> list[str]:
    """Bash lines that end a job ``failed`` when ``command`` is not on the node, before anything
    starts: they write ``<work_dir>/status.json`` (``state: failed``, ``error``:
    :func:`command_missing_error`, which ``arena status`` shows), print the reason to stderr
    (the job's log) and exit :data:`COMMAND_MISSING_EXIT`.

    ``command`` is the first word of the command line the script runs (an executable name or
    path); ``work_dir`` is a shell expression for the run's (or shard's) directory, quoted by
    the caller (it may expand ``$OUT`` or ``$SLURM_ARRAY_TASK_ID``); ``fix`` says which option
    or image to change. The status is written the way :class:`arena.outputs.records.StatusWriter`
    writes it (a temporary file renamed over it), with its fields.
    """
    error = command_missing_error(command, fix)
    status = {
        "state": "failed", "error": error, "run": run, "episodes_done": 0, "episodes_total": 0, "successes": 0,
        "errors": 0, "last_progress_at": None, "restarts": 0,
    }
    return [
        f"# {MISSING_CHECK_MARK}: the command below must exist on the node, else the run ends failed saying so",
        f"if ! command -v {shlex.quote(command)} >/dev/null 2>&1; then",
        f"  echo {shlex.quote(f'arena: run {run} failed: {error}')} >&2",
        f"  status_dir={work_dir}",
        f'  mkdir -p "$status_dir" && printf \'%s\\n\' {shlex.quote(json.dumps(status))} > "$status_dir/{STATUS_FILE}.tmp" \\',
        f'    && mv -f "$status_dir/{STATUS_FILE}.tmp" "$status_dir/{STATUS_FILE}"',
        f"  exit {COMMAND_MISSING_EXIT}",
        "fi",
    ]
