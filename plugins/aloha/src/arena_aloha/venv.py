"""The ALOHA sim venv: gym-aloha with its MuJoCo, arena-core and this plugin.

gym-aloha 0.1.5 requires ``mujoco < 3.9`` (it installs dm_control 1.0.41 and MuJoCo 3.8.1),
which arena-core's built-in simulators and other benchmarks do not accept, so the ``aloha``
environment's workers run under this venv's interpreter (docs/architecture.md, "Environment workers"): the environment's
``default_venv``. :func:`ensure_aloha_venv` creates it with :func:`arena.venvs.ensure_venv`
under ``$ARENA_VENVS/aloha`` and does nothing when it is up to date (~650 MB; no downloads at
run time: the scenes ship in the wheel).
"""

from __future__ import annotations

from pathlib import Path

#: The venv's name under ``$ARENA_VENVS``.
VENV_NAME = "aloha"
#: What the venv holds besides arena-core and this plugin.
REQUIREMENTS = ("gym-aloha==0.1.5",)
DISTRIBUTION = "arena-plugin-aloha"


def ensure_aloha_venv(*, python: str | None = None, quiet: bool = False) -> Path:
    """Create or update the ALOHA sim venv; return its interpreter.

    ``python``: the base interpreter (default: the running one; Python 3.11 or 3.12).

    Raises:
        arena.venvs.VenvError: the venv could not be created or ``pip install`` failed.
    """
    from arena.venvs import ensure_venv

    return ensure_venv(VENV_NAME, python=python, packages=[DISTRIBUTION], requirements=list(REQUIREMENTS), quiet=quiet)
