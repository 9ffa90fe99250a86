"""Child processes that never outlive arena, grandchildren included.

Everything arena starts — policy servers and runners of the local backend, the watchdog's
rollout child, environment workers — goes through :func:`spawn`. On Linux the command runs
under a keeper (:mod:`arena.keeper`): a tiny process that leads a new session and process
group, runs the command in that group, and stops the whole tree (SIGTERM, then SIGKILL after
a grace period) when the process that called :func:`spawn` disappears, even by SIGKILL, or
when the command exits and leaves processes behind. The returned ``Popen`` is the keeper's:
its ``pid`` is the process group's id and its ``returncode`` the command's.

Elsewhere the command starts in a new session without a keeper (it does not die with arena).
The new session keeps a Ctrl-C in the terminal from reaching children: arena stops them in
order itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1

#: Seconds a keeper waits between SIGTERM and SIGKILL when it stops its tree.
KEEPER_GRACE_S = 5.0
_KEEPER = Path(__file__).with_name("keeper.py")


def keeper_available() -> bool:
    """Whether :func:`spawn` runs commands under a keeper here (Linux)."""
    return sys.platform.startswith("linux") and _KEEPER.is_file()


def spawn(
    argv: Sequence[str],
    log_path: Path | None,
    env: Mapping[str, str] | None = None,
    *,
    pass_fds: Sequence[int] = (),
    capture_output: bool = False,
) -> subprocess.Popen:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` (``None``: inherited).

    ``pass_fds`` stay open in the command under the same numbers. ``capture_output`` sends
    stdout and stderr to a pipe (``proc.stdout``) instead of ``log_path``.

    Raises:
        arena.errors.ExecutableNotFound: ``argv[0]`` is not an executable (checked here, as
            ``Popen`` would; a ``FileNotFoundError``).
    """
    argv = [str(a) for a in argv]
    _check_executable(argv[0], env)
    command = argv
    if keeper_available():
        command = [sys.executable, "-I", "-S", str(_KEEPER), str(os.getpid()), str(KEEPER_GRACE_S), *argv]
    common: dict = dict(
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    if capture_output:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **common)
    if log_path is None:
        return subprocess.Popen(command, **common)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, **common)


def _die_with_parent() -> None:
    """``preexec_fn`` for a direct child that must get SIGTERM when the spawning thread exits.

    For processes whose own pid the caller signals (the test doubles of
    :mod:`arena.testing.doubles`); everything else goes through :func:`spawn`.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        except OSError:
            pass


def _check_executable(program: str, env: Mapping[str, str] | None) -> None:
    from arena.errors import ExecutableNotFound

    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ExecutableNotFound(program, f"`{program}` is not an executable file")
    elif shutil.which(program, path=path) is None:
        raise ExecutableNotFound(program, f"`{program}` is not on PATH")


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
