"""Child processes of the local backend never outlive what started them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
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


# -- the keeper ------------------------------------------------------------------------------

_FORKER = """
import os, subprocess, sys, time
pids = [os.getpid()]
# a grandchild in the same process group, and one that leaves for a session of its own
pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]).pid)
pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True).pid)
open(sys.argv[1] + ".tmp", "w").write(" ".join(map(str, pids)))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""


def _wait_for(path: Path, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return path.read_text()


def _all_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, 9)


@contextlib.contextmanager
def _killed_stand_in(starts: str, pid_file: Path) -> Iterator[list[int]]:
    """A process standing in for arena runs ``starts`` (Python, with ``os``, ``subprocess`` and
    ``sys`` imported), then waits; the body gets the pids the started tree wrote to
    ``pid_file``; then the stand-in is SIGKILLed and everything it started must be gone."""
    stand_in = f"import os, subprocess, sys, time\n{starts}time.sleep(120)\n"
    arena = subprocess.Popen([sys.executable, "-c", stand_in])
    pids: list[int] = []
    try:
        pids = [int(p) for p in _wait_for(pid_file).split()]
        yield pids
        arena.kill()
        arena.wait(timeout=10)
        assert _all_gone(pids) == []
    finally:
        arena.kill()
        _kill_all(pids)


def test_sigkill_of_the_spawner_stops_children_and_grandchildren(tmp_path):
    pid_file = tmp_path / "pids"
    forker = tmp_path / "forker.py"
    forker.write_text(_FORKER)
    # stands in for arena: spawns the forking server
    starts = f"from arena.processes import spawn\nspawn([sys.executable, {str(forker)!r}, {str(pid_file)!r}], None)\n"
    with _killed_stand_in(starts, pid_file) as pids:
        assert all(_alive(p) for p in pids)


def test_a_child_spawned_from_a_thread_that_exits_lives_on():
    import threading

    procs = []
    thread = threading.Thread(target=lambda: procs.append(spawn([sys.executable, "-c", "import time; time.sleep(60)"], None)))
    thread.start()
    thread.join()
    proc = procs[0]
    try:
        time.sleep(1.0)  # the parent-death signal of the spawning thread would have fired by now
        assert proc.poll() is None
    finally:
        terminate(proc, grace_s=1.0)


def test_exit_code_and_signal_read_as_without_a_keeper(tmp_path):
    assert spawn([sys.executable, "-c", "import sys; sys.exit(7)"], None).wait(timeout=30) == 7
    crash = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    assert spawn([sys.executable, "-c", crash], tmp_path / "log").wait(timeout=30) == -11
    with pytest.raises(FileNotFoundError):
        spawn(["arena-no-such-program"], None)


def test_a_command_that_exits_leaves_nothing_behind(tmp_path):
    pid_file = tmp_path / "pid"
    script = (
        "import subprocess, sys; "
        "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True); "
        f"open({str(pid_file)!r}, 'w').write(str(w.pid)); sys.exit(3)"
    )
    proc = spawn([sys.executable, "-c", script], None)
    assert proc.wait(timeout=60) == 3
    worker = int(pid_file.read_text())
    try:
        assert _all_gone([worker]) == []
    finally:
        _kill_all([worker])


def test_sigterm_from_another_process_is_forwarded_to_the_command(tmp_path):
    proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"], None)
    try:
        time.sleep(0.5)
        subprocess.run(["kill", "-TERM", str(proc.pid)], check=True)  # the keeper's pid
        assert proc.wait(timeout=30) == -15
    finally:
        terminate(proc, grace_s=1.0)


# A server that ignores SIGTERM, with a grandchild in a session of its own. The grandchild
# notes the SIGTERM it gets and whose child it was then (its parent still alive, or the keeper
# it was reparented to once its parent had died).
_STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
note = sys.argv[1] + ".term"
grandchild = (
    "import os, signal, sys, time\\n"
    "def on_term(*_):\\n"
    f"    open({note!r}, 'w').write(str(os.getppid()))\\n"
    "    sys.exit(0)\\n"
    "signal.signal(signal.SIGTERM, on_term)\\n"
    "time.sleep(120)\\n"
)
pids = [os.getpid(), subprocess.Popen([sys.executable, "-c", grandchild], start_new_session=True).pid]
time.sleep(0.5)  # the grandchild's handler is installed
open(sys.argv[1] + ".tmp", "w").write(" ".join(map(str, pids)))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""


def test_a_grandchild_that_left_the_session_is_stopped_with_its_parent_not_after_it(tmp_path):
    """Issue 38 item 11, deterministically: a grandchild in a session of its own used to be
    found only once its parent had died and it was reparented to the keeper, i.e. after the
    grace, when SIGKILL was due, and only if the keeper looked again soon enough (under load it
    had given up by then). Now it is part of the tree from the start: it gets the SIGTERM while
    its parent (which ignores SIGTERM) still lives, whatever the timing."""
    from arena import keeper

    pid_file = tmp_path / "pids"
    stubborn = tmp_path / "stubborn.py"
    stubborn.write_text(_STUBBORN)
    # stands in for arena: the keeper with a 1 s grace
    starts = (
        f"subprocess.Popen([sys.executable, '-I', '-S', {keeper.__file__!r}, str(os.getpid()), '1.0', "
        f"sys.executable, {str(stubborn)!r}, {str(pid_file)!r}], start_new_session=True)\n"
    )
    with _killed_stand_in(starts, pid_file) as pids:
        server, grandchild = pids
    note = Path(f"{pid_file}.term")
    assert note.exists(), "the grandchild never got SIGTERM: it was found only after its parent died"
    assert int(note.read_text()) == server, "the grandchild got SIGTERM only after its parent had died"
