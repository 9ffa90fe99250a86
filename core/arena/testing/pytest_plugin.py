"""pytest fixtures for arena and plugin authors (registered through the ``pytest11`` entry point).

With ``arena_fresh_user_dirs = true`` in the pytest configuration, the whole session (and
every process it starts) sees a new, empty home: ``HOME``, ``XDG_*``, ``HF_HOME``, pip's and
torch's caches and the like point into a temporary folder made before any test module is
imported and removed at the end (:mod:`arena.testing.user_dirs`). arena's own suite and the
packages ``arena plugins new`` generates turn it on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

FRESH_USER_DIRS_INI = "arena_fresh_user_dirs"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        FRESH_USER_DIRS_INI,
        type="bool",
        default=False,
        help="arena: point HOME, XDG_*, HF_HOME and other per-user caches at a new empty folder for the session",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before conftest files and test modules import anything that reads the home folder."""
    import shutil
    import tempfile

    from arena.testing import user_dirs

    if not early_config.getini(FRESH_USER_DIRS_INI) or os.environ.get(user_dirs.MARKER):
        return  # off, or already inside a fresh session (a test that runs pytest): keep it
    root = tempfile.mkdtemp(prefix="arena-user-dirs-")
    saved = {name: os.environ.get(name) for name in (*user_dirs.USER_DIRS, *user_dirs.QUIET, "PYENV_ROOT", user_dirs.MARKER)}
    user_dirs.apply(root)

    def restore() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(root, ignore_errors=True)

    early_config.add_cleanup(restore)


def pytest_report_header(config: pytest.Config) -> str | None:
    from arena.testing.user_dirs import MARKER

    if config.getini(FRESH_USER_DIRS_INI) and os.environ.get(MARKER):
        return f"arena: fresh per-user directories (HOME, XDG_*, HF_HOME, ...) under {os.environ[MARKER]}"
    return None


@pytest.fixture
def arena_plugin() -> Iterator[Callable[[object, str], None]]:
    """Register a plugin object (module or object with ``@hookimpl``s) for one test.

    Usage: ``arena_plugin(MyPlugin(), "my-plugin")``; it is unregistered after the test.
    """
    from arena.plugins import get_plugin_manager

    manager = get_plugin_manager()
    names: list[str] = []

    def register(plugin: object, name: str) -> None:
        manager.register(plugin, name=name)
        names.append(name)

    yield register
    for name in names:
        manager.unregister(name)


@pytest.fixture
def policy_server() -> Iterator[Callable[..., Any]]:
    """Start a model in arena's policy server on 127.0.0.1 (ephemeral port) for one test.

    ``policy_server("metaworld-expert")`` (a registered name, with ``**options``) or
    ``policy_server(model)``; returns the running ``PolicyServer`` (``.host``, ``.port``).
    """
    from arena.plugins import get_registry
    from arena.transport.policy_server import PolicyServer

    servers: list[PolicyServer] = []

    def start(model: Any, **options: Any) -> PolicyServer:
        if isinstance(model, str):
            model = get_registry().servers[model](**options)
        server = PolicyServer(model, host="127.0.0.1", port=0)
        server.start_in_thread()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def openpi_double() -> Iterator[Callable[..., Any]]:
    """Start a generic openpi-protocol double: ``openpi_double(reply_factory, validator=None, **knobs)``.

    Returns the running :class:`arena.testing.OpenPIDouble`; its ``model.requests`` holds what
    the client sent.
    """
    from arena.testing.doubles import OpenPIDouble, RecordingModel

    doubles: list[OpenPIDouble] = []

    def start(reply_factory, validator=None, **knobs: Any) -> OpenPIDouble:
        server_kwargs = {k: knobs.pop(k) for k in list(knobs) if k in ("max_batch_size", "max_wait_ms", "api_key")}
        double = OpenPIDouble(RecordingModel(reply_factory, validator, **knobs), **server_kwargs)
        double.__enter__()
        doubles.append(double)
        return double

    yield start
    for double in doubles:
        double.__exit__(None, None, None)


@pytest.fixture
def run_experiment(tmp_path: Path) -> Callable[..., Any]:
    """Run a tiny experiment (dict, YAML text or path) into a fresh directory under tmp_path."""
    from arena.testing.experiments import run_tiny_experiment

    counter = {"n": 0}

    def run(experiment: Any, overrides: list[str] | tuple[str, ...] = ()) -> Any:
        counter["n"] += 1
        return run_tiny_experiment(experiment, tmp_path / f"out{counter['n']}", overrides)

    return run


@pytest.fixture
def reference_server(policy_server: Callable[..., Any]) -> Any:
    """arena's Meta-World expert model served on 127.0.0.1 (``.host``, ``.port``) for one test."""
    return policy_server("metaworld-expert")


@pytest.fixture
def arena_cli(tmp_path: Path) -> Callable[..., Any]:
    """Run the ``arena`` command in a subprocess: ``arena_cli("plugins", "--json")``.

    Returns the ``subprocess.CompletedProcess`` (text ``stdout``/``stderr``); the working
    directory is the test's ``tmp_path``; ``timeout`` (s, default 300) and ``env`` (extra
    variables) are keyword options.
    """
    import os
    import subprocess
    import sys

    def run(*args: str, timeout: float = 300.0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "arena", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp_path,
            env={**os.environ, **(env or {})},
        )

    return run
