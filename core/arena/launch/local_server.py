"""One policy server process started by the local backend, and its readiness, without blocking.

The local backend's scheduler runs in one thread and polls; a server is ``starting`` until its
readiness check passes (``ready``), its process exits, or ``startup_timeout_s`` runs out
(``failed``, with the reason). Never a fixed sleep.

A ``ready`` server whose process exits (a crash, the OOM killer) is started again on the same
host and port, at most ``max_restarts`` times, after a back-off of 0.5 s doubling to 5 s; it
is ``starting`` again until its readiness check passes. Clients reconnect to the same endpoint.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from arena.errors import TransportError
from arena.processes import spawn, terminate
from arena.servertask import ServerTask


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LocalServer:
    """A ServerTask's ``local_command`` running on this machine, logging to ``log_path``."""

    def __init__(self, task: ServerTask, host: str, port: int, log_path: Path, *, max_restarts: int = 0) -> None:
        self.task = task
        self.host = host
        self.port = port
        self.log_path = log_path
        self.max_restarts = max_restarts
        self.restarts = 0
        self.state = "pending"  # pending | starting | ready | failed | stopped
        self.error: str | None = None
        self.last_exit: str | None = None  # why the last restart happened
        self._proc = None
        self._deadline = 0.0
        self._next_probe = 0.0
        self._spawn_at: float | None = None  # a restart waiting for its back-off

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        """Start the process (state ``starting``)."""
        argv = self.task.render(self.task.local_command or [], host=self.host, port=self.port, python=sys.executable)
        env = {**os.environ, **self.task.env}
        self._proc = spawn(argv, self.log_path, env)
        self._spawn_at = None
        self._deadline = time.monotonic() + self.task.startup_timeout_s
        self.state = "starting"

    def poll(self) -> str:
        """Advance the readiness check by at most one short probe, or notice that a ready
        server's process exited and restart it (bounded); return the state."""
        if self.state == "ready":
            assert self._proc is not None
            code = self._proc.poll()
            if code is None:
                return self.state
            terminate(self._proc, grace_s=0)  # what the crashed server left in its group
            if self.restarts >= self.max_restarts:
                self._fail(
                    f"server '{self.task.name}' exited with code {code} and was restarted "
                    f"{self.restarts} time(s) already (max_restarts={self.max_restarts}; see {self.log_path})"
                )
                return self.state
            self.restarts += 1
            self.last_exit = f"exited with code {code}"
            delay = min(5.0, 0.5 * 2 ** (self.restarts - 1))
            self._spawn_at = time.monotonic() + delay
            self.state = "starting"
            with open(self.log_path, "a") as log:
                log.write(
                    f"\n[arena] server exited with code {code}; restart {self.restarts}/{self.max_restarts} "
                    f"on {self.host}:{self.port} in {delay:g} s\n"
                )
            return self.state
        if self.state != "starting":
            return self.state
        if self._spawn_at is not None:
            if time.monotonic() < self._spawn_at:
                return self.state
            self.start()
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            terminate(self._proc, grace_s=0)
            self._fail(f"server '{self.task.name}' exited with code {code} before it was ready (see {self.log_path})")
            return self.state
        now = time.monotonic()
        if now >= self._deadline:
            self._fail(
                f"server '{self.task.name}' was not ready ({self.task.readiness} on {self.host}:{self.port}) "
                f"within startup_timeout_s={self.task.startup_timeout_s:g} s (see {self.log_path})"
            )
            self.stop()
            return self.state
        if now < self._next_probe:
            return self.state
        from arena.transport.probe import probe_once

        try:
            probe_once(self.task.readiness, self.host, self.port, timeout_s=min(2.0, max(0.1, self._deadline - now)))
        except (TransportError, OSError):
            self._next_probe = time.monotonic() + 0.2
            return self.state
        self.state = "ready"
        return self.state

    def _fail(self, reason: str) -> None:
        self.state = "failed"
        self.error = reason

    def stop(self) -> None:
        """Stop the process group (SIGTERM, then SIGKILL). Idempotent."""
        if self._proc is not None:
            terminate(self._proc, grace_s=5.0)
        if self.state in ("starting", "ready", "pending"):
            self.state = "stopped"
