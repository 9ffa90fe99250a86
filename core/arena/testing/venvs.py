"""Benchmark venvs in tests: the interpreter of one, or a skip (a failure under CI).

Tests of a benchmark that runs in its own venv (``arena NAME setup``, :mod:`arena.venvs`)
need that venv. On a developer's machine without it they are skipped with the command that
creates it; under CI (``$CI`` set), where ``scripts/setup-env.sh test`` creates every
workspace plugin's venv, a missing venv is a failure, so a broken set-up never passes as
skipped tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def benchmark_python(name: str, setup_command: str) -> Path:
    """The interpreter of benchmark venv ``name`` (:func:`arena.venvs.venv_python`).

    ``setup_command`` is what creates it (e.g. ``arena aloha setup``), named in the skip or
    failure message.
    """
    from arena.venvs import venv_python

    python = venv_python(name)
    if python.exists():
        return python
    message = f"the {name} venv ({python}) does not exist: run `{setup_command}`"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI: scripts/setup-env.sh test creates it)")
    pytest.skip(message)
