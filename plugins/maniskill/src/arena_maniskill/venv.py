"""The ManiSkill3 venv, declared: mani-skill 3.0.1 (SAPIEN 3.0.3, mplib 0.1.1), its CPU torch.

ManiSkill pins no numpy and no torch build: ``pip install mani-skill==3.0.1`` alone takes
numpy 2.x, with which mplib 0.1.1 (the motion planners' library) segfaults (ManiSkill issues
#1100 and #1359), and the newest torch, a CUDA build of ~5 GB. So the venv pins ``numpy<2``
and ``torch==2.13.0``, the CPU wheel these machines hold (ManiSkill 3.0.1 imports, simulates
and renders with it: the plugin's tests run on it). On a GPU node ``physx_cuda`` needs a CUDA
torch instead: point ``environment.python`` at such a venv (see the plugin's README).

ManiSkill's torch, SAPIEN and mplib conflict with nothing of arena-core, but with LeRobot's
(numpy >= 2, torch < 2.11), so the ``maniskill`` environment's workers run under this venv's
interpreter (docs/architecture.md, "Environment workers"): :data:`VENV` is its
``default_venv``. ``arena venv setup maniskill`` (or ``arena maniskill setup``) creates it.
Rendering needs Vulkan on the machine (``.ci/setup.d/vulkan.sh``; ``arena doctor`` checks it).
"""

from __future__ import annotations

from arena.venvs import VenvSpec

VENV = VenvSpec(
    name="maniskill",
    summary="mani-skill 3.0.1 (SAPIEN 3.0.3, mplib 0.1.1), torch 2.13.0, numpy<2; ~2.1 GB with the CPU torch; rendering needs Vulkan",
    python=">=3.11,<3.13",
    distributions=("arena-plugin-maniskill",),
    requirements=("mani-skill==3.0.1", "numpy<2", "torch==2.13.0"),
)
