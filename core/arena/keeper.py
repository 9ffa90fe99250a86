"""The keeper: a tiny process that makes a child process tree die with the process that started it.

Run as ``python -I -S keeper.py PARENT_PID GRACE_S ARGV...`` (standard library only, so it
starts in milliseconds and never imports arena) by :func:`arena.processes.spawn`, which
starts it as the leader of a new session and process group. The keeper:

- starts ``ARGV`` as its child in its own process group (fds marked inheritable pass through
  unchanged; the keeper closes its copies), with the parent-death signal SIGKILL (exact here:
  the keeper has one thread), and makes itself a child subreaper, so descendants that are
  orphaned — even ones that moved to a session of their own — are reparented to it;
- watches its parent (``PARENT_PID``): every 0.2 s it compares ``getppid()``, which changes
  when the parent is gone (unlike ``PR_SET_PDEATHSIG``, this does not fire when only the
  thread that spawned it exits). When the parent is gone it stops the tree: SIGTERM to every
  process of its session, to the descendants reparented to it and to every descendant of
  those (including ones in a session of their own whose parent still lives), SIGKILL after
  ``GRACE_S``;
- forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the child (and survives
  the last two: a scheduler's "time limit near" signal is the child's to act on), except when
  they come from its parent or from itself: arena signals whole process groups
  (:func:`arena.processes.signal_group`), so the child has them already;
- when the child exits, stops whatever the child left behind the same way, then exits with
  the child's status (a child killed by a signal makes the keeper die of the same signal,
  without a core dump), so ``Popen.returncode`` reads as if there were no keeper.

Exit code 125: the parent was gone before the child could start; 127: ``ARGV`` could not be
executed (the reason is on stderr). Linux only (``/proc``, ``prctl``, ``sigtimedwait``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_TERMINATING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
_FORWARDED = (*_TERMINATING, signal.SIGUSR1, signal.SIGUSR2)
_WATCHED = (*_FORWARDED, signal.SIGCHLD)
_POLL_S = 0.2
EXIT_PARENT_GONE = 125
EXIT_EXEC_FAILED = 127


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(option, value, 0, 0, 0)


def _inherited_fds() -> list[int]:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.fstat(fd)
            except OSError:  # the descriptor listdir itself used
                continue
            fds.append(fd)
    return fds


def _start(argv: list[str]) -> int:
    keeper = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child, between fork and exec
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != keeper:  # the keeper died already
            os._exit(EXIT_PARENT_GONE)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; a child must not
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        os.execvp(argv[0], argv)
    except BaseException as exc:  # noqa: BLE001 - reported, then the child exits 127
        try:
            os.write(2, f"arena keeper: cannot run {argv[0]}: {exc}\n".encode())
        finally:
            os._exit(EXIT_EXEC_FAILED)
    raise AssertionError("unreachable")


def _processes() -> dict[int, tuple[bytes, int, int, int]]:
    """Every visible process: pid -> (state, ppid, process group, session), from ``/proc``."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            found[int(name)] = (fields[0], int(fields[1]), int(fields[2]), int(fields[3]))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _alive(pid: int, state: bytes) -> bool:
    """Not a zombie; a thread-group leader that exited before its other threads shows ``Z``
    while the process still runs (its ``task`` folder lists them)."""
    if state != b"Z":
        return True
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def _tree(keeper: int) -> list[int]:
    """The keeper's tree: processes of its session or group, its direct children (reparented
    orphans) and every descendant of those, wherever it moved (``setsid``, ``setpgid``).

    Descendants are found through their parents, not through the keeper: a grandchild that left
    for a session of its own is a member while its parent still lives, so it is signalled with
    it instead of becoming visible only once its parent has died and it was reparented here
    (which, under load, could come after the keeper gave up: issue 38 item 11).
    """
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, (_, ppid, pgrp, session) in table.items() if keeper in (ppid, pgrp, session) and pid != keeper]
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid == keeper:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, ()))
    return sorted(pid for pid in seen if _alive(pid, table[pid][0]))


class _Children:
    """Reaps every exited child (the keeper is a subreaper) and keeps the wait status of one."""

    def __init__(self, child: int) -> None:
        self.child = child
        self.status: int | None = None

    def reap(self) -> None:
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.child:
                self.status = wait_status


#: Seconds a process may take to die after its SIGKILL before the keeper stops waiting for it
#: (one stuck in the kernel, uninterruptibly, never dies: rather than hang, the keeper leaves it).
_KILL_WAIT_S = 5.0


def _stop_tree(keeper: int, children: _Children, grace_s: float) -> None:
    """SIGTERM everything of the tree, SIGKILL what is left after ``grace_s``.

    No member escapes by timing: each one found, whenever it is found (a process forked or
    reparented meanwhile), gets SIGKILL once the grace is over, and the keeper waits up to
    ``_KILL_WAIT_S`` after *its own* SIGKILL before leaving it, however slowly the keeper itself
    is scheduled.
    """
    deadline = time.monotonic() + grace_s
    killed: dict[int, float] = {}  # pid -> when it was first sent SIGKILL
    while True:
        children.reap()
        members = _tree(keeper)
        if not members:
            return
        now = time.monotonic()
        if now >= deadline:
            if all(pid in killed and now - killed[pid] > _KILL_WAIT_S for pid in members):
                return  # unkillable (stuck in the kernel): give up rather than hang
            for pid in members:
                killed.setdefault(pid, now)
        sig = signal.SIGKILL if now >= deadline else signal.SIGTERM
        for pid in members:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        signal.sigtimedwait([signal.SIGCHLD], 0.05)


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # die of it without a core dump
        except (ImportError, OSError, ValueError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is not to terminate
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.stderr.write("usage: keeper.py PARENT_PID GRACE_S ARGV...\n")
        os._exit(2)
    parent, grace_s, command = int(argv[0]), float(argv[1]), argv[2:]
    keeper = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if os.getppid() != parent:
        os._exit(EXIT_PARENT_GONE)
    inherited = _inherited_fds()
    child = _start(command)
    for fd in inherited:  # the child holds them now; EOF must follow the child's exit
        try:
            os.close(fd)
        except OSError:
            pass
    children = _Children(child)
    while children.status is None:
        info = signal.sigtimedwait(_WATCHED, _POLL_S)
        children.reap()
        if children.status is not None:
            break
        if info is not None and info.si_signo in _FORWARDED and info.si_pid not in (parent, keeper):
            try:
                os.kill(child, info.si_signo)
            except ProcessLookupError:
                pass
        if os.getppid() != parent:  # arena is gone: so is everything it started
            _stop_tree(keeper, children, grace_s)
            break
    _stop_tree(keeper, children, grace_s)  # what the child left behind
    _exit_like(children.status if children.status is not None else signal.SIGKILL)

if __name__ == "__main__":
    main(sys.argv[1:])
