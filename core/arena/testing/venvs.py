"""Benchmark venvs in tests: the interpreter of one, or a skip (a failure under CI).

Tests of a benchmark that runs in its own venv (an environment's declared ``default_venv``,
:mod:`arena.venvs`) need that venv. ``scripts/setup-env.sh test`` creates every declared venv
(``arena venv setup``) in the checkout's ``.venvs/`` (where arena looks when it runs from the
checkout's ``.venv``, and where the suite's ``conftest.py`` points ``$ARENA_VENVS``). Without it
a test is skipped on a developer's machine, with the command that creates it, and fails under
CI (``$CI`` set), so a broken set-up never passes as skipped tests.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest


def benchmark_python(name: str, setup_command: str | None = None) -> Path:
    """The interpreter of benchmark venv ``name`` (:func:`arena.venvs.venv_python`), which a
    registered environment must declare.

    ``setup_command``: what creates it, named in the skip or failure message (default: the
    declaration's ``arena venv setup NAME``).

    Raises:
        pytest.fail.Exception: no registered environment or servable model declares a venv ``name`` (a test that
            names a venv nobody declares is wrong), or the venv is missing under CI.
    """
    from arena.venvs import declared_venvs, venv_python

    declared = declared_venvs()
    if name not in declared:
        pytest.fail(f"no registered environment or servable model declares a venv named {name!r} (declared: {', '.join(declared) or 'none'})")
    python = venv_python(name)
    if python.exists():
        return python
    command = setup_command or declared[name][0].setup_command
    message = f"the {name} venv ({python}) does not exist: run `scripts/setup-env.sh test` (or `{command}`)"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI: scripts/setup-env.sh test creates it)")
    pytest.skip(message)


def run_in_venv(
    name: str,
    *argv: str,
    setup_command: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600,
) -> Any:
    """Run ``python *argv`` under benchmark venv ``name``'s interpreter (:func:`benchmark_python`:
    skipped when missing, failed under CI) and return the JSON value its **last** stdout line
    holds: the simulator checks a plugin's tests cannot run in the suite's own interpreter
    (``python sim_checks.py CHECK``, ``python -m arena.testing.environments SPEC``).

    ``env``: variables added to this process's environment (e.g. ``MUJOCO_GL``).

    Raises:
        pytest.fail.Exception: the command exited non-zero (the end of its stderr in the message).
        subprocess.TimeoutExpired: it ran longer than ``timeout_s``.
    """
    python = benchmark_python(name, setup_command)
    done = subprocess.run(
        [str(python), *argv], capture_output=True, text=True, timeout=timeout_s, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        pytest.fail(f"{python} {' '.join(argv)[:200]} exited {done.returncode}:\n{done.stderr[-3000:]}", pytrace=False)
    return json.loads(done.stdout.strip().splitlines()[-1])
