"""Fixtures: vla-eval's real model-server code serving :class:`arena_vla_eval.dummy.DummyModelServer`
on loopback, in this process (tests read what the model saw) or as a process a test can kill."""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("vla_eval", reason="the tests run vla-eval's server code: pip install 'vla-eval==0.8.0'")


@pytest.fixture
def serve_dummy():
    """``serve_dummy(**options)`` -> context manager of ``(model, port)``."""
    from arena_vla_eval.testing import served

    return served


@pytest.fixture
def server_process():
    """``server_process(*args)`` -> a started :class:`arena.testing.doubles.ServerProcess` of the
    dummy on a fixed free port (``start()`` again after ``kill()`` reuses it), stopped at teardown."""
    from arena.testing.doubles import ServerProcess

    started: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = ServerProcess("arena_vla_eval.testing", *args, port=port).start()
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
