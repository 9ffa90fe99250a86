"""The body of one Ray task: ``arena node SPEC [--shard K/N] [--resume]`` on the node Ray chose.

The command runs under :func:`arena.processes.spawn`, so it never outlives the Ray worker that
started it: a node removed from the cluster (its raylet and workers killed) takes the
supervisor, its policy server and its runner with it, and their leases return to the queue.
``ray.cancel`` (``arena cancel``, Ctrl-C) raises ``KeyboardInterrupt`` in the task: the
supervisor gets SIGTERM (the run is recorded ``cancelled``), then SIGKILL after ``grace_s``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

from arena.processes import signal_group, spawn, terminate


def run_node(argv: list[str], log_path: str, env: dict[str, str], grace_s: float) -> dict:
    """Run ``argv`` (``arena node ...``) with ``env`` added, its output appended to
    ``log_path``; returns ``{"code", "node"}`` (the exit code; 128 + N for signal N)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    proc = spawn(argv, Path(log_path), {**os.environ, **env})
    try:
        code = None
        while code is None:  # short waits: ray.cancel's KeyboardInterrupt lands between two
            try:
                code = proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    except KeyboardInterrupt:  # ray.cancel
        if proc.poll() is None:
            signal_group(proc, signal.SIGTERM)
        try:
            code = proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            terminate(proc, grace_s=0)
            code = proc.returncode
        raise
    return {"code": 128 - code if code < 0 else code, "node": socket.gethostname()}
