"""Benchmark venvs in tests: the interpreter of one, or a skip (a failure under CI).

Tests of a benchmark that runs in its own venv (``arena NAME setup``, :mod:`arena.venvs`)
need that venv. ``scripts/setup-env.sh test`` creates every workspace plugin's venv under
``$ARENA_VENVS`` (by default ``.venvs/`` of the checkout, where the suite's ``conftest.py``
points ``$ARENA_VENVS``). Without it a test is skipped on a developer's machine, with the
commands that create it, and fails under CI (``$CI`` set), so a broken set-up never passes as
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
    message = f"the {name} venv ({python}) does not exist: run `scripts/setup-env.sh test` (or `{setup_command}`)"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI: scripts/setup-env.sh test creates it)")
    pytest.skip(message)
