"""Child processes of the local backend never outlive what started them."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from arena.processes import spawn, terminate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups as on Linux")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped by its adopter yet) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_terminate_kills_the_workers_of_a_server_that_already_exited(tmp_path):
    pid_file = tmp_path / "worker.pid"
    # The leader starts a worker in its own process group, then exits (a crashed server).
    script = (
        "import subprocess, sys, pathlib; "
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"pathlib.Path({str(pid_file)!r}).write_text(str(w.pid))"
    )
    proc = spawn([sys.executable, "-c", script], tmp_path / "server.log")
    proc.wait(timeout=30)
    worker = int(pid_file.read_text())
    assert _alive(worker)
    try:
        terminate(proc, grace_s=1.0)
        deadline = time.monotonic() + 5
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        if _alive(worker):
            os.kill(worker, 9)
