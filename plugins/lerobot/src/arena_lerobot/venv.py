"""The model venv ``lerobot``: where ``arena serve lerobot`` (and the ``lerobot_env`` bridge's
environment workers) run (``arena venv setup lerobot``).

LeRobot 0.6.1 needs Python >= 3.12 and ``torch>=2.7,<2.12``; every torch of that range for
CPython 3.12 on the package index is a CUDA build that lists its nvidia-* libraries as
dependencies (``import torch`` links cuBLAS, cuDNN, NCCL, ... even on a CPU-only machine), and
torch 2.11.0 (CUDA 13) is the smallest wheel of them (531 MB). The lightest venv that runs is
the fully resolved package list ``model-venv.txt`` (next to this module: LeRobot 0.6.1 with the
extras pusht, aloha, diffusion, dataset, training, evaluation, metaworld, plus
``lerobot-env-so101``) installed ``--no-deps`` without triton, cuda-bindings and cuda-pathfinder,
which nothing arena or LeRobot runs imports (they serve ``torch.compile`` and CUDA's Python
bindings). Measured size and set-up time: plugins/lerobot/README.md, "The lerobot venv". The same
venv serves on a GPU node (``device: auto`` picks CUDA; CUDA 13 needs an NVIDIA driver >= 580).

It is kept apart from arena-core's interpreter and from every simulator venv (ManiSkill wants
torch 2.13 and ``numpy<2``). The list is regenerated with the command in its header.
"""

from __future__ import annotations

from pathlib import Path

from arena.venvs import PipStep, VenvSpec

#: The pinned, fully resolved package list the venv installs with ``--no-deps``.
LOCK_FILE = Path(__file__).with_name("model-venv.txt")
#: The LeRobot release the venv holds (the lock's pin).
LEROBOT_VERSION = "0.6.1"

LEROBOT_VENV = VenvSpec(
    name="lerobot",
    summary=f"LeRobot {LEROBOT_VERSION} with torch 2.11.0 (CUDA build, runs on the CPU too), gym-pusht, gym-aloha, "
    "metaworld 3.0.0 and lerobot-env-so101, for `arena serve lerobot` and `lerobot_env`: ~5.6 GB",
    python="==3.12.*",  # lerobot 0.6.1: requires-python >= 3.12; the lock's wheels are cp312
    distributions=("arena-plugin-lerobot",),
    # pip install --no-deps -r LOCK: every pinned package, no resolver (which would add triton).
    # Skipped while LeRobot's pin is installed (checking the 131 pins costs ~35 s of pip's index
    # look-ups on every set-up): a list that changes other pins only, takes `rm -r` of the venv
    steps=(PipStep(args=("--no-deps", "-r", str(LOCK_FILE)), unless_installed=f"lerobot=={LEROBOT_VERSION}"),),
)
