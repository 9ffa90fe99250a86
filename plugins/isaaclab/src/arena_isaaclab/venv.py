"""The Isaac Lab venv, declared: the Python 3.12 venv the simulator runs in.

Isaac Lab 3 requires Python 3.12 and pins torch 2.11; arena itself may run on 3.11. The venv
(``$ARENA_VENVS/isaaclab``, :mod:`arena.venvs`) holds arena-core without the built-in
simulators' extras, this plugin with its ``[sim]`` extra (the packages a kit-less Isaac Lab run
imports: torch, Warp, Newton, MuJoCo-Warp, OpenUSD, Hydra), and ``isaaclab`` itself, installed
``--no-deps`` (its own requirements are the full 7.8 GB set: RTX tooling, open3d,
transformers, RL libraries; the set-up option ``full`` installs those too). ``arena venv setup
isaaclab`` (or its alias ``arena isaaclab setup [--full]``) creates it from a Python 3.12 it
finds (``$ARENA_ISAACLAB_PYTHON``, ``python3.12`` on ``PATH``, pyenv's, ``/usr/bin``; see
:func:`arena.venvs.python_candidates`) or ``--python``. Running it again does nothing unless
something changed (the venv's stamp, then whether ``isaaclab`` has the release below).
"""

from __future__ import annotations

from arena.venvs import PipStep, VenvSpec

#: The Isaac Lab release the ``[sim]`` extra's pins belong to.
ISAACLAB_REQUIREMENT = "isaaclab==3.0.0"

VENV = VenvSpec(
    name="isaaclab",
    summary="Isaac Lab 3.0.0 kit-less on Newton, torch 2.11, Warp; Python 3.12; ~5.5 GB",
    python="==3.12.*",
    distributions=("arena-plugin-isaaclab[sim]",),
    steps=(
        PipStep(args=("--no-deps", ISAACLAB_REQUIREMENT), unless_installed=ISAACLAB_REQUIREMENT, unless_option="full"),
        PipStep(args=(ISAACLAB_REQUIREMENT,), option="full"),
    ),
    options={"full": "install Isaac Lab with all its dependencies (7.8 GB), not the kit-less set"},
)
