"""One policy server process started by the local backend, and its readiness, without blocking.

The local backend's scheduler runs in one thread and polls; a server is ``starting`` until its
readiness check passes (``ready``), its process exits, or ``startup_timeout_s`` runs out
(``failed``, with the reason). Never a fixed sleep.

Ready means three things: the readiness probe passes (presenting the API key the clients
use: a server that refuses it fails at once, naming the HTTP 401), the process arena started
is alive, and the socket listening on the port belongs to that process, its process group
or its descendants (:mod:`arena.launch.listeners`). A probe answered by anything else — an
impostor that took the port between choosing and binding — never makes a server ready:
before the server was first ready it is started again on another port (at most
``MAX_PORT_MOVES`` times); afterwards clients know the port, so the server fails with the
impostor's pid and command. A server that exits before it is ready fails with the cause its log
states: the exception line of its last traceback, else its last lines (the bind error, e.g.
"address already in use").

A ``ready`` server whose process exits (a crash, the OOM killer) is started again on the same
host and port, at most ``max_restarts`` times, after a back-off of 0.5 s doubling to 5 s; it
is ``starting`` again until its readiness check passes. Clients reconnect to the same endpoint.

Stopping is SIGTERM, then SIGKILL after ``stop_grace_s``, each noted in the server's log. The
command may be a scheduler's launcher (a Slurm ``srun`` step) whose tasks are not arena's
descendants: ``signal_command`` (a shell command, ``{signal}`` filled with ``TERM`` or
``KILL``) then signals them where the launcher would not pass a signal on gracefully, and
``instance_env`` marks the tasks of each start (``NAME=<unique value>`` in their
environment), so the port check knows them as this server's. This class is the one policy
server lifecycle of arena: the local backend's scheduler drives it, and so does the node
supervisor (:mod:`arena.launch.node`) that Slurm jobs and OSMO tasks run.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

from arena.errors import ExecutableNotFound, TransportError
from arena.launch.listeners import foreign_listeners
from arena.processes import signal_group, spawn, terminate
from arena.servertask import ServerTask
from arena.transport.errors import Unauthorized

#: Times a server not yet ready moves to a new port when its port turns out to be taken.
MAX_PORT_MOVES = 2


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


#: The most of a server's log :func:`log_cause` reads (its end), and of the reason it returns.
_LOG_WINDOW = 65536
_CAUSE_CHARS = 400


def log_cause(path: Path, lines: int = 3, limit: int = _CAUSE_CHARS) -> str:
    """Why a server failed, from the end of its log (for failure messages): the line that
    states the cause of its last Python traceback (the exception type and message, e.g.
    ``ValueError: unknown policy type 'act_v9'; choose one of {...}``) unless more than a few
    lines follow it (then it was handled), else the last of its last ``lines`` non-empty lines
    that states one (``error: ...``), else those lines joined with `` | ``. Lines arena wrote
    (``[arena] ...``) are skipped. At most ``limit`` characters, cut at the end (a message's
    start names its cause); ``""`` when the log is missing or empty."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _LOG_WINDOW))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    shown = [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("[arena]")]
    cause = _cause_line(shown, lines)
    joined = cause if cause is not None else " | ".join(line.strip() for line in shown[-lines:])
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


#: A line that states a cause by itself: ``ValueError: ...``, ``pkg.SomeException: ...`` or
#: an ``error: ...`` line (what ``arena serve`` prints for an :class:`arena.errors.ArenaError`).
_CAUSE_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit)|error|fatal)(?::|$)")


#: Lines a cause may be followed by and still be the one the process died of (a message's
#: continuation lines, a library's last words); an exception further up was handled.
_AFTER_CAUSE = 10


def _cause_line(lines: list[str], last: int) -> str | None:
    """The exception line of the last ``Traceback (most recent call last):`` block (its first
    line that is not indented: the frames and source lines are) when at most
    :data:`_AFTER_CAUSE` lines follow it, else the last line of the last ``last`` that states a
    cause (:data:`_CAUSE_LINE`), else ``None``."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        for i in range(starts[-1] + 1, len(lines)):
            if not lines[i][:1].isspace():
                if len(lines) - 1 - i <= _AFTER_CAUSE:
                    return lines[i].strip()
                break
    return next((line.strip() for line in reversed(lines[-last:]) if _CAUSE_LINE.match(line)), None)


class LocalServer:
    """A ServerTask's ``local_command`` running on this machine, logging to ``log_path``.

    ``api_key_env`` (a variable NAME) makes the server require that key (the task's
    ``api_key_args``); ``probe_key`` is the key the readiness probe presents (the clients');
    ``env`` adds variables to the server's environment (a generated key, ``CUDA_VISIBLE_DEVICES``).
    ``port`` 0 picks a free port at start, and lets the server move to another one when its
    port turns out to be taken before it was first ready; a given port never moves.

    ``command``: the argv to start instead of the task's ``local_command`` (its ``{port}``
    filled at each start; a backend's launcher wrapped around the task's command);
    ``probe_host``: where the readiness probe connects (default ``host``, the bind address);
    ``restarts_option``: the option ``max_restarts`` came from, named in the error when
    restarts run out; ``stop_grace_s``, ``signal_command``, ``instance_env``: see the module.
    """

    def __init__(
        self,
        task: ServerTask,
        host: str,
        port: int,
        log_path: Path,
        *,
        max_restarts: int = 0,
        api_key_env: str | None = None,
        probe_key: str | None = None,
        env: dict[str, str] | None = None,
        command: list[str] | None = None,
        probe_host: str | None = None,
        restarts_option: str = "max_restarts",
        stop_grace_s: float = 5.0,
        signal_command: str | None = None,
        instance_env: str | None = None,
    ) -> None:
        self.task = task
        self.command = list(command) if command is not None else None
        self.probe_host = probe_host or host
        self.restarts_option = restarts_option
        self.stop_grace_s = stop_grace_s
        self.signal_command = signal_command
        self.instance_env = instance_env
        self._instance: str | None = None
        self.host = host
        self.port = port
        self.log_path = log_path
        self.max_restarts = max_restarts
        self.api_key_env = api_key_env
        self.probe_key = probe_key
        self.env = dict(env or {})
        self.restarts = 0
        self.port_moves = 0
        self.state = "pending"  # pending | starting | ready | failed | stopped
        self.error: str | None = None
        self.last_exit: str | None = None  # why the last restart happened
        self.gpus: list[str] | None = None  # CUDA_VISIBLE_DEVICES entries it was given
        self._ever_ready = False
        self._movable = port == 0
        self._proc = None
        self._deadline = 0.0
        self._next_probe = 0.0
        self._spawn_at: float | None = None  # a restart waiting for its back-off

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def argv(self, port: int | None = None) -> list[str]:
        """The command line, rendered for ``port`` (default: the current one)."""
        if self.command is not None:
            value = str(self.port if port is None else port)
            return [arg.replace("{port}", value) for arg in self.command]
        return self.task.render(
            self.task.local_command or [],
            host=self.host,
            port=self.port if port is None else port,
            python=self.task.local_python(),
            api_key_env=self.api_key_env,
        )

    def start(self) -> None:
        """Start the process (state ``starting``); a port of 0 becomes a free one first.

        A command whose program is not an executable here (``vla-eval`` not on ``PATH``)
        leaves the server ``failed``, :attr:`error` naming the program, and its log saying so."""
        if self.port == 0:
            self.port = free_port(self.host)
        env = {**os.environ, **self.task.env, **self.env, "PORT": str(self.port)}
        if self.instance_env is not None:
            self._instance = f"{os.getpid()}.{self.port}.{secrets.token_hex(8)}"
            env[self.instance_env] = self._instance
        try:
            self._proc = spawn(self.argv(), self.log_path, env)
        except ExecutableNotFound as exc:
            self._proc, self._spawn_at = None, None
            self._fail(
                f"server '{self.task.name}' cannot start: {exc} (install it or put it on PATH, "
                "or start the server yourself and set `server: {external: true}`)"
            )
            self.note(self.error or "")
            return
        self._spawn_at = None
        self._deadline = time.monotonic() + self.task.startup_timeout_s
        self.state = "starting"

    def note(self, text: str) -> None:
        """Append an ``[arena]`` line to the server's log."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            log.write(f"\n[arena] {text}\n")

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
                tail = log_cause(self.log_path)
                self._fail(
                    f"policy server '{self.task.name}' exited with code {code} and was restarted "
                    f"{self.restarts} time(s) ({self.restarts_option}={self.max_restarts})"
                    f"{': ' + tail if tail else ''} (see {self.log_path})"
                )
                return self.state
            self.restarts += 1
            self.last_exit = f"exited with code {code}"
            delay = min(5.0, 0.5 * 2 ** (self.restarts - 1))
            self._spawn_at = time.monotonic() + delay
            self.state = "starting"
            self.note(
                f"server exited with code {code}; restart {self.restarts} of {self.max_restarts} "
                f"on {self.host}:{self.port} in {delay:g} s"
            )
            return self.state
        if self.state != "starting":
            return self.state
        if self._spawn_at is not None:
            if time.monotonic() < self._spawn_at:
                return self.state
            self.start()
            if self.state == "failed":  # its program is gone
                return self.state
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            terminate(self._proc, grace_s=0)
            held = self._foreign()
            if held and self._move_port(f"port {self.port} is held by {held}"):
                return self.state
            tail = log_cause(self.log_path)
            why = f": {tail}" if tail else ""
            taken = f"; port {self.port} is held by {held}" if held else ""
            self._fail(
                f"server '{self.task.name}' exited with code {code} before it was ready{why}{taken} (see {self.log_path})"
            )
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

        timeout = min(2.0, max(0.1, self._deadline - now))
        try:
            probe_once(self.task.readiness, self.probe_host, self.port, timeout_s=timeout, api_key=self.probe_key)
        except Unauthorized as exc:
            self.stop()
            self._fail(f"server '{self.task.name}' refused the readiness probe's API key: {exc} (see {self.log_path})")
            return self.state
        except (TransportError, OSError):
            self._next_probe = time.monotonic() + 0.2
            return self.state
        held = self._foreign()
        if held:
            # The probe was answered, but not by the process arena started.
            if self._move_port(f"the readiness probe on port {self.port} was answered by {held}"):
                return self.state
            self.stop()
            self._fail(
                f"port {self.port} on {self.host} is held by {held}, not by server '{self.task.name}' "
                f"(pid {self.pid}): it never answers arena's clients (see {self.log_path})"
            )
            return self.state
        self.state = "ready"
        self._ever_ready = True
        return self.state

    def _foreign(self) -> str | None:
        """Who else listens on the port (``None``: nobody, or no ``/proc`` to tell)."""
        if self._proc is None:
            return None
        marker = (self.instance_env, self._instance) if self.instance_env and self._instance else None
        others = foreign_listeners(self.port, self._proc.pid, self.host, marker)
        return others[0].describe() if others else None

    def _move_port(self, reason: str) -> bool:
        """Start again on a new port (only before the server was ever ready, and boundedly)."""
        if not self._movable or self._ever_ready or self.port_moves >= MAX_PORT_MOVES:
            return False
        assert self._proc is not None
        terminate(self._proc, grace_s=2.0)
        old = self.port
        self.port = free_port(self.host)
        self.port_moves += 1
        self.note(f"{reason}, not by this server: starting it again on another port, {self.port} (was {old})")
        self.start()
        return True

    def _fail(self, reason: str) -> None:
        self.state = "failed"
        self.error = reason

    def stop(self, why: str = "no run needs it any more") -> None:
        """Stop the server: SIGTERM, SIGKILL after ``stop_grace_s`` (both noted in its log),
        then whatever is left of its process group. Idempotent."""
        if self._proc is not None:
            if self._proc.poll() is None:
                grace = self.stop_grace_s
                self.note(f"stopping the policy server ({why}): SIGTERM, SIGKILL after {grace:g} s")
                self._signal(signal.SIGTERM)
                try:
                    self._proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.note(f"the policy server did not stop within {grace:g} s: SIGKILL")
                    self._signal(signal.SIGKILL)
            terminate(self._proc, grace_s=0)
        if self.state in ("starting", "ready", "pending"):
            self.state = "stopped"

    def _signal(self, sig: signal.Signals) -> None:
        """``sig`` to the server: through ``signal_command`` when it has one (and it works),
        else to the process group arena started."""
        assert self._proc is not None
        if self.signal_command is not None:
            command = self.signal_command.replace("{signal}", sig.name.removeprefix("SIG"))
            try:
                done = subprocess.run(["bash", "-c", command], capture_output=True, timeout=30)
                if done.returncode == 0:
                    if sig == signal.SIGKILL:
                        signal_group(self._proc, sig)
                    return
            except (OSError, subprocess.TimeoutExpired):
                pass
        signal_group(self._proc, sig)
