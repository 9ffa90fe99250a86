"""The ``osmo`` command line, the only way arena talks to OSMO (there is no OSMO SDK on PyPI).

Commands used (NVIDIA/OSMO ``src/cli/workflow.py`` and ``src/cli/data.py``):

- ``osmo workflow submit FILE --pool P --priority X --format-type json`` prints the service's
  JSON answer; its ``name`` is the workflow ID. arena never parses the text form, so a
  changed message cannot orphan a running workflow.
- ``osmo workflow query ID --format-type json``: ``status`` and ``groups[].tasks[]`` with each
  task's ``name``, ``status``, ``exit_code``, ``failure_message``.
- ``osmo workflow cancel ID... --message M --format-type json``.
- ``osmo workflow logs ID --task T``: a header line, then the task's log.
- ``osmo data download URL DIR``.
- ``osmo credential set NAME --type GENERIC --payload-file KEY=PATH`` (the value is read from
  the file; arena passes ``/dev/stdin`` so a secret is never on a command line or on disk)
  and ``osmo credential delete NAME`` (``src/cli/credential.py``).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from typing import Any

from arena.errors import LaunchError

OSMO = "osmo"
INSTALL_HINT = (
    "install the OSMO CLI (OSMO user guide, getting_started/install) and log in with `osmo login https://<service>/`"
)


class OsmoCliError(LaunchError):
    """An ``osmo`` command failed or answered something arena cannot read."""


def executable() -> str:
    """The path of ``osmo`` on PATH.

    Raises:
        OsmoCliError: it is not installed.
    """
    path = shutil.which(OSMO)
    if path is None:
        raise OsmoCliError(f"the `osmo` command is not on PATH: {INSTALL_HINT}")
    return path


def run(args: list[str], *, timeout_s: float = 300.0, stdin: str | None = None) -> str:
    """Run ``osmo ARGS`` (with ``stdin`` as its standard input); return its stdout.

    Raises:
        OsmoCliError: not installed, non-zero exit (with its stderr), or timed out.
    """
    argv = [executable(), *args]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, check=False, input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise OsmoCliError(f"`{shlex.join(['osmo', *args])}` did not answer within {timeout_s:g} s") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip() or "no output"
        raise OsmoCliError(f"`{shlex.join(['osmo', *args])}` failed (exit {proc.returncode}): {detail}")
    return proc.stdout


def _json(args: list[str], text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise OsmoCliError(f"`{shlex.join(['osmo', *args])}` did not print JSON: {text.strip()[:300]!r}") from None


def submit(path: str, pool: str, priority: str) -> str:
    """Submit one workflow file; return its workflow ID."""
    args = ["workflow", "submit", path, "--pool", pool, "--priority", priority, "--format-type", "json"]
    answer = _json(args, run(args))
    workflow_id = answer.get("name") if isinstance(answer, dict) else None
    if not isinstance(workflow_id, str) or not workflow_id:
        raise OsmoCliError(f"`{shlex.join(['osmo', *args])}` answered without a workflow ID: {answer!r}")
    return workflow_id


def query(workflow_id: str) -> dict[str, Any]:
    """The workflow's JSON status (``status``, ``groups[].tasks[]``)."""
    args = ["workflow", "query", workflow_id, "--format-type", "json"]
    answer = _json(args, run(args, timeout_s=120.0))
    if not isinstance(answer, dict) or "status" not in answer:
        raise OsmoCliError(f"`{shlex.join(['osmo', *args])}` answered without a status: {answer!r}")
    return answer


def cancel(workflow_ids: list[str], message: str) -> str:
    """Ask OSMO to cancel ``workflow_ids``; return what it printed."""
    return run(["workflow", "cancel", *workflow_ids, "--message", message, "--format-type", "json"])


def task_logs(workflow_id: str, task: str) -> str:
    """The log of one task (the CLI's header line removed)."""
    text = run(["workflow", "logs", workflow_id, "--task", task], timeout_s=600.0)
    first, sep, rest = text.partition("\n")
    return rest if sep and first.startswith("Workflow ") and "logs" in first else text


def data_download(url: str, local_dir: str) -> None:
    """Download the objects under ``url`` into ``local_dir``."""
    run(["data", "download", url, local_dir], timeout_s=3600.0)


def set_secret_credential(name: str, key: str, value: str) -> None:
    """Create (or replace) the GENERIC credential ``name`` holding ``key`` = ``value``; the
    value goes through standard input, never the command line."""
    run(["credential", "set", name, "--type", "GENERIC", "--payload-file", f"{key}=/dev/stdin"], stdin=value)


def delete_credential(name: str) -> None:
    """Delete the credential ``name``."""
    run(["credential", "delete", name])
