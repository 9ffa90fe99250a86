"""Runs OpenVLA's or OpenVLA-OFT's own ``vla-scripts/deploy.py`` (``reference/openvla``,
``reference/openvla-oft``: unchanged copies, models stubbed) as arena's managed command renders
it, in a process group of its own that :func:`stop` ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REFERENCE = Path(__file__).parent / "reference"
OPENVLA = REFERENCE / "openvla"
OFT = REFERENCE / "openvla-oft"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], checkout: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` with ``checkout`` and its ``stubs`` (torch, transformers) importable; the
    command line is parsed by the real draccus (a test extra), as OpenVLA's checkout does it.
    stdout and stderr together in ``.stdout``."""
    paths = [str(checkout), str(checkout / "stubs")]
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(proc: subprocess.Popen, port: int, timeout_s: float = 60.0) -> None:
    """Wait for FastAPI's ``/openapi.json`` (arena's readiness check for these servers).

    Raises:
        AssertionError: the server exited (with its output) or did not answer in ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"deploy.py exited with {proc.returncode}:\n{proc.stdout.read().decode()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"deploy.py did not serve /openapi.json within {timeout_s} s")


def stop(proc: subprocess.Popen) -> str:
    """End the process group ``start`` made (nothing else); returns the server's output."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.stdout.read().decode(errors="replace")
