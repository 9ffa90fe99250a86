"""Fixtures: vla-eval's real model-server code (``vla_eval.model_servers.serve.serve_async``)
serving :class:`arena_vla_eval.dummy.DummyModelServer` on loopback, in this process (so tests
can read what the model saw) or as a subprocess (so a test can kill it)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("vla_eval", reason="the tests run vla-eval's server code: pip install 'vla-eval==0.8.0'")


@contextmanager
def served(**options: Any) -> Iterator[tuple[Any, int]]:
    """``(model, port)``: a DummyModelServer behind vla-eval's ``serve_async`` on 127.0.0.1."""
    import anyio.from_thread

    from arena_vla_eval.dummy import DummyModelServer
    from vla_eval.model_servers.serve import serve_async

    model = DummyModelServer(**options)
    with anyio.from_thread.start_blocking_portal() as portal:
        future, port = portal.start_task(serve_async, model, "127.0.0.1", 0)
        try:
            yield model, port
        finally:
            future.cancel()


@pytest.fixture
def serve_dummy():
    """``serve_dummy(**options)`` -> context manager of ``(model, port)``."""
    return served


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m arena_vla_eval.dummy`` on a fixed port, killable and restartable."""

    def __init__(self, port: int, *args: str) -> None:
        self.port = port
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "arena_vla_eval.dummy", "--address", f"127.0.0.1:{self.port}", *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the dummy server exited with {self.proc.returncode}")
                time.sleep(0.05)
        raise RuntimeError("the dummy server did not listen within 60 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def server_process():
    """``server_process(*args)`` -> a started :class:`ServerProcess`, killed at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, port: int | None = None) -> ServerProcess:
        proc = ServerProcess(port or free_port(), *args).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
