"""`arena serve` as a user runs it: it says where it serves once it is listening, and a taken
port is one line and exit 3, with no claim that it is serving."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time


def _serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "arena", "serve", "metaworld-expert", "--host", "127.0.0.1", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_taken_port_fails_with_exit_3_and_never_says_serving():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = _serve("--port", str(taken.getsockname()[1]))
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    assert "cannot serve on 127.0.0.1" in err
    assert "serving" not in err + out


def test_serving_is_said_after_binding_with_the_real_port_and_ctrl_c_exits_0():
    proc = _serve("--port", "0")
    try:
        deadline = time.monotonic() + 120
        line = ""
        while time.monotonic() < deadline and "serving" not in line:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "arena serve exited early"
        match = re.search(r"serving metaworld-expert on ws://127\.0\.0\.1:(\d+) ", line)
        assert match, line
        port = int(match.group(1))
        assert port != 0
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass  # it is listening when it says so
        from arena.transport.probe import wait_until_ready

        wait_until_ready("http:/readyz", "127.0.0.1", port, 120)  # the model has loaded
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_ctrl_c_while_the_model_loads_exits_0_not_with_a_crash():
    """Ctrl-C right after start-up lands in model.load() (importing MuJoCo): the process
    used to die with SIGSEGV about half the time, as the interpreter shut down under it."""
    codes = []
    for _ in range(5):
        proc = _serve("--port", "0")
        assert "serving" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        codes.append(proc.returncode)
    assert codes == [0] * 5
