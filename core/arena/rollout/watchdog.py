"""The watchdog of ``arena run-one`` (``launch.watchdog``): restart a rollout that stops progressing.

The rollout runs in a child process (``arena run-one …`` with ``$ARENA_WATCHDOG_CHILD`` set).
The supervisor reads the child's ``status.json`` every ``poll_s`` seconds; *progress* is any
change of ``last_progress_at`` or ``episodes_done`` (run-one advances ``last_progress_at`` on
every episode end and at least every 5 s while env steps go on). Output on stdout is not
progress: a process can print while wedged, and a sim can be silent while working.

- No progress for ``first_episode_grace_s`` after a (re)start, until the child finishes its
  first episode (server start-up, model compilation, a cold simulator), then for ``stall_s``:
  the child's process group gets SIGTERM, then SIGKILL after ``kill_grace_s``, and a new child
  resumes the run (``--resume``: finished episodes are kept, only the rest runs).
- A child that dies without writing a final state (a crash, the OOM killer) is resumed the
  same way. A child that ends with a final state (``completed``/``failed``/``cancelled``) or
  with exit code 2 (configuration error) is never retried: its exit code is returned.
- At most ``max_restarts`` restarts. Each one is recorded in ``status.json``: ``restarts``
  (the count) and ``restart_history`` (``[{"at", "reason"}]``). After the last allowed one the
  run is marked ``failed`` (``status.json`` and ``run_result.json``) and exit code 3 returned.
- SIGTERM to the supervisor (``arena cancel``) is passed to the child, which records
  ``cancelled``; SIGUSR1 (a scheduler's time limit is near) likewise, the child recording
  ``failed`` with the limit; the supervisor then returns the child's exit code.

Improves on Arena's stdout-silence watchdog (a cold start could be killed before its first
line; a restart emptied the run's outputs): here the grace period and resume keep work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arena.outputs.layout import STATUS_FILE
from arena.rollout.invocation import WATCHDOG_CHILD_ENV
from arena.processes import spawn, terminate
from arena.outputs.records import (
    FINAL_STATES,
    StatusWriter,
    read_json,
    utc_now,
    write_run_result,
)

EXIT_CONFIG = 2
EXIT_RUN = 3


def _log(text: str) -> None:
    print(f"arena watchdog: {text}", file=sys.stderr, flush=True)


class _Progress:
    """Tracks the child's status.json between polls."""

    def __init__(self, status_path: Path) -> None:
        self.path = status_path
        self.signature: tuple[Any, Any] | None = None
        self.changed_at = time.monotonic()
        self.start_done: int | None = None
        self.first_episode = False

    def restart(self, resuming: bool) -> None:
        """A new child starts: silence counts from now; its first episode is still to come."""
        self.changed_at = time.monotonic()
        self.first_episode = False
        self.start_done = 0
        if resuming:  # a resumed child starts from the episodes already recorded
            status = read_json(self.path)
            done = status.get("episodes_done") if isinstance(status, dict) else None
            self.start_done = done if isinstance(done, int) else None

    def poll(self) -> dict[str, Any]:
        status = read_json(self.path)
        status = status if isinstance(status, dict) else {}
        signature = (status.get("last_progress_at"), status.get("episodes_done"))
        if signature != self.signature:
            self.signature = signature
            self.changed_at = time.monotonic()
        done = status.get("episodes_done")
        if isinstance(done, int):
            if self.start_done is None:
                self.start_done = done
            elif done > self.start_done:
                self.first_episode = True
        return status

    def silent_for(self) -> float:
        return time.monotonic() - self.changed_at


def _spawn(argv: Sequence[str]) -> subprocess.Popen:
    env = dict(os.environ)
    env[WATCHDOG_CHILD_ENV] = "1"
    return spawn(argv, None, env)


def supervise(
    argv: Sequence[str],
    work_dir: str | os.PathLike[str],
    config: Any,
    *,
    resume: bool = False,
    run: str | None = None,
    shard: Sequence[int] | None = None,
    episodes_total: int | None = None,
    poll_s: float = 1.0,
    kill_grace_s: float = 10.0,
) -> int:
    """Run ``argv`` (an ``arena run-one`` command line) under the watchdog; return its exit code.

    ``config`` is a :class:`arena.config.models.WatchdogConfig` (``stall_s``,
    ``first_episode_grace_s``, ``max_restarts``); ``work_dir`` holds the child's
    ``status.json``. ``resume`` adds ``--resume`` to the first child too (restarts always
    resume). See the module docstring for the rules.
    """
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    status_path = work_dir / STATUS_FILE
    base = [a for a in argv if a != "--resume"]
    restarts = 0
    if resume:
        old = read_json(status_path)
        if isinstance(old, dict) and isinstance(old.get("restarts"), int):
            restarts = old["restarts"]
    budget = restarts + int(config.max_restarts)
    cancelled = threading.Event()
    child: dict[str, subprocess.Popen | None] = {"proc": None}

    def on_sigterm(signum: int, frame: Any) -> None:
        cancelled.set()
        proc = child["proc"]
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signum)  # SIGTERM or SIGUSR1: the child records why it stops
            except (ProcessLookupError, PermissionError):
                pass

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = (signal.signal(signal.SIGTERM, on_sigterm), signal.signal(signal.SIGUSR1, on_sigterm))
    progress = _Progress(status_path)
    attempt_resume = resume
    if resume:  # a final state left by the previous attempt must not pass for the new child's
        current = read_json(status_path)
        if isinstance(current, dict) and current.get("state") in FINAL_STATES:
            current["state"] = "running"
            StatusWriter(status_path).write(**current)
    try:
        while True:
            command = base + (["--resume"] if attempt_resume else [])
            progress.restart(attempt_resume)
            proc = child["proc"] = _spawn(command)
            _log(f"started the rollout (pid {proc.pid}{', resuming' if attempt_resume else ''})")
            reason = None
            while True:
                code = proc.poll()
                status = progress.poll()
                if code is not None:
                    if cancelled.is_set() or code == EXIT_CONFIG or status.get("state") in FINAL_STATES:
                        return code
                    reason = f"the rollout process exited with code {code} without finishing"
                    break
                if cancelled.is_set():
                    try:
                        return proc.wait(timeout=kill_grace_s + 30)
                    except subprocess.TimeoutExpired:
                        terminate(proc, kill_grace_s)
                        return EXIT_RUN
                limit = config.stall_s if progress.first_episode else config.first_episode_grace_s
                if progress.silent_for() > limit:
                    what = "no progress" if progress.first_episode else "no episode finished"
                    reason = f"{what} for {limit:g} s"
                    terminate(proc, kill_grace_s)
                    break
                time.sleep(poll_s)
            if restarts >= budget:
                error = f"{reason}; gave up after {restarts} restart(s) (launch.watchdog.max_restarts)"
                _log(error)
                _give_up(work_dir, status_path, error, run, shard, episodes_total)
                return EXIT_RUN
            restarts += 1
            _record_restart(status_path, restarts, reason)
            _log(f"{reason}: restart {restarts} of {budget}, resuming")
            attempt_resume = True
    finally:
        proc = child["proc"]
        if proc is not None and proc.poll() is None:
            terminate(proc, kill_grace_s)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGUSR1, previous[1])


def _record_restart(status_path: Path, restarts: int, reason: str) -> None:
    current = read_json(status_path)
    current = current if isinstance(current, dict) else {}
    history = current.get("restart_history")
    history = list(history) if isinstance(history, list) else []
    history.append({"at": utc_now(), "reason": reason})
    current.update(state="running", restarts=restarts, restart_history=history, pid=os.getpid())
    StatusWriter(status_path).write(**current)


def _give_up(work_dir: Path, status_path: Path, error: str, run: str | None, shard, episodes_total) -> None:
    current = read_json(status_path)
    current = current if isinstance(current, dict) else {}
    current.update(state="failed", error=error)
    StatusWriter(status_path).write(**current)
    write_run_result(
        work_dir,
        run=run or str(current.get("run") or work_dir.name),
        state="failed",
        error=error,
        episodes_total=episodes_total,
        shard=shard,
    )
