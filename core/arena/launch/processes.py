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
import time
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


def spawn(argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` with stdout and stderr appended to ``log_path``.

    Call from the thread that outlives the child: the parent-death signal fires when the
    spawning *thread* exits.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def terminate(proc: subprocess.Popen, grace_s: float = 10.0) -> int | None:
    """SIGTERM the process group, wait ``grace_s`` seconds, then SIGKILL it. Returns the exit code."""
    if proc.poll() is not None:
        return proc.returncode
    _signal_group(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _signal_group(proc, signal.SIGKILL)  # stray grandchildren of the group
            return proc.returncode
        time.sleep(0.05)
    _signal_group(proc, signal.SIGKILL)
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
