"""Child processes that never outlive arena: their own session, and killed with their parent.

Servers and runners start in their own session (so a Ctrl-C in the terminal reaches arena,
which stops them in order) and, on Linux, with a parent-death signal (so they stop even when
arena itself is killed with SIGKILL).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass


def spawn(argv: Sequence[str], log_path: Path | None, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` (``None``: inherited).

    Call from the thread that outlives the child: the parent-death signal fires when the
    spawning *thread* exits.
    """
    common = dict(
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    if log_path is None:
        return subprocess.Popen(list(argv), **common)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, **common)


def terminate(proc: subprocess.Popen, grace_s: float = 10.0) -> int | None:
    """SIGTERM the process group, wait ``grace_s`` seconds, then SIGKILL it. Returns the exit code.

    The group is killed even when its leader has already exited: workers it started (a
    server's model processes) would otherwise keep the port, the GPU and the memory.
    """
    if proc.poll() is None:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    signal_group(proc, signal.SIGKILL)  # what is left: the leader, or stray grandchildren
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to ``proc``'s process group (a no-op when the group is gone)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
