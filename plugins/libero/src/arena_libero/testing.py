"""Test helpers: find the LIBERO venv the way the test suite sets it up.

``scripts/setup-env.sh test`` (which ``make test`` and CI run) creates it with ``arena libero
setup`` under ``$ARENA_VENVS``, by default ``.venvs/`` of the checkout. Tests that need the
simulator call :func:`libero_python`: without the venv they are skipped on a developer's
machine and fail under CI (``CI`` set), so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arena_libero.venv import VENV_NAME

#: The checkout's default location of benchmark venvs for the test suite.
CHECKOUT_VENVS = Path(__file__).resolve().parents[4] / ".venvs"


def libero_venvs() -> Path:
    """``$ARENA_VENVS`` if set, else the checkout's ``.venvs``."""
    return Path(os.environ.get("ARENA_VENVS") or CHECKOUT_VENVS)


def libero_python() -> Path:
    """The LIBERO venv's interpreter; skips the test (fails it under CI) when it is missing."""
    python = libero_venvs() / VENV_NAME / "bin" / "python"
    if not python.exists():
        message = f"no LIBERO venv at {python.parent.parent}: run scripts/setup-env.sh test (or arena libero setup)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python
