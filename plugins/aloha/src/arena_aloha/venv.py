"""The ALOHA sim venv, declared: gym-aloha with its MuJoCo, arena-core and this plugin.

gym-aloha 0.1.5 requires ``mujoco < 3.9`` (it installs dm_control 1.0.41 and MuJoCo 3.8.1),
which arena-core's built-in simulators and other benchmarks do not accept, so the ``aloha``
environment's workers run under this venv's interpreter (docs/architecture.md, "Environment
workers"): :data:`VENV` is the environment's ``default_venv``. ``arena venv setup aloha`` (or
its alias ``arena aloha setup``) creates it (:mod:`arena.venvs`; ~650 MB; no downloads at run
time: the scenes ship in the wheel). gym-aloha was verified on Python 3.11 and 3.12
(``reference/benchmarks.md``).
"""

from __future__ import annotations

from arena.venvs import VenvSpec

VENV = VenvSpec(
    name="aloha",
    summary="gym-aloha 0.1.5, dm_control 1.0.41, MuJoCo 3.8; ~650 MB",
    python=">=3.11,<3.13",
    distributions=("arena-plugin-aloha",),
    requirements=("gym-aloha==0.1.5",),
)
