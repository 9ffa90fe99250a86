"""A folder owned by one process: a lock file in it naming the owner's pid and host.

``arena watch`` takes ``WATCH_DIR/watch.lock`` before it reads ``watch.json``, so a second
watch on the same folder is refused with the first one named instead of both evaluating the
same checkpoints. The file holds ``{"pid", "host", "pid_started", "command", "since"}``;
``pid_started`` (the process's start time from ``/proc``, where there is one) tells the owner
from a later process that reuses its pid. A lock is *stale* once its owner is dead: its host
is this machine and its pid is gone (or is another process); a stale lock is taken over. A
lock of another host is never judged stale (its pid means nothing here): the error says so
and which file to remove once that watch is known to be gone.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from arena.errors import ConfigError


def _started(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc/<pid>/stat`` field
    22), or ``None`` where it cannot be read (no ``/proc``, or no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` still runs and is the process that took the lock."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = _started(pid)
    return started is None or now is None or now == started


class FolderLock:
    """``path`` (a lock file) held by this process from :meth:`acquire` until :meth:`release`.

    ``what`` names the owner's kind in messages (``"arena watch"``).
    """

    def __init__(self, path: str | os.PathLike[str], what: str) -> None:
        self.path = Path(path)
        self.what = what
        self.held = False

    def acquire(self) -> str | None:
        """Take the lock; returns a note when a stale lock (its owner dead) was taken over, else ``None``.

        Raises:
            ConfigError: another live process holds it (its pid, host, command and since when
                are named), or it was taken on another host, or the file cannot be written.
        """
        note = None
        for _ in range(3):  # a stale lock removed, then taken: another process may win the race
            mine = {"pid": os.getpid(), "host": socket.gethostname(), "pid_started": _started(os.getpid()),
                    "command": " ".join(["arena", *sys.argv[1:]]) if sys.argv else None, "since": _now()}
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            try:
                temporary.write_text(json.dumps(mine))
                os.link(temporary, self.path)  # atomic, and refused when the lock exists: never half written
            except FileExistsError:
                owner = self._owner()
                if owner is None:  # written whole or not at all: not arena's, or edited
                    raise ConfigError(f"{self.path} exists but is not a lock arena wrote: if no {self.what} runs on "
                                      f"{self.path.parent}, remove {self.path}") from None
                stale = self._stale(owner)
                if stale is None:
                    raise ConfigError(self._refusal(owner)) from None
                note = stale
                self.path.unlink(missing_ok=True)
                continue
            except OSError as exc:
                raise ConfigError(f"cannot write the lock {self.path}: {exc.strerror or exc}") from None
            finally:
                temporary.unlink(missing_ok=True)
            self.held = True
            return note
        raise ConfigError(f"{self.path}: another {self.what} took the folder while this one started")

    def release(self) -> None:
        """Remove the lock file if this process holds it (never another's)."""
        if not self.held:
            return
        owner = self._owner()
        if owner is not None and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
            self.path.unlink(missing_ok=True)
        self.held = False

    def _owner(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None

    def _stale(self, owner: dict[str, Any]) -> str | None:
        """Why ``owner``'s lock is stale (its process is gone), or ``None`` while it may still hold it."""
        if owner.get("host") != socket.gethostname():
            return None
        if _alive(int(owner["pid"]), owner.get("pid_started")):
            return None
        return f"the lock of {self.what} process {owner['pid']} (no longer running) was taken over"

    def _refusal(self, owner: dict[str, Any]) -> str:
        who = f"process {owner['pid']} on {owner.get('host')}" + (f" since {owner['since']}" if owner.get("since") else "")
        command = f" ({owner['command']})" if owner.get("command") else ""
        if owner.get("host") != socket.gethostname():
            return (f"{self.path.parent} is owned by another {self.what}: {who}{command}; two on one folder would "
                    f"evaluate the same checkpoints. Stop it, or give another --output-dir; if it is no longer "
                    f"running (its host cannot be checked from here), remove {self.path}")
        return (f"{self.path.parent} is owned by another {self.what}: {who}{command}; two on one folder would "
                f"evaluate the same checkpoints. Stop it (kill {owner['pid']}), or give another --output-dir")


def _now() -> str:
    from arena.outputs.records import utc_now

    return utc_now()
