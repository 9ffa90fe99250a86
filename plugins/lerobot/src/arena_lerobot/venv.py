"""The model venv ``lerobot``: where ``arena serve lerobot`` runs (``arena venv setup lerobot``).

LeRobot 0.4.4 pins ``torch<2.11`` and ``torchvision<0.26``; the package index's only torch that
satisfies it is the CUDA build of torch 2.10.0 (it runs on the CPU as well; the CPU wheels on
the index are 2.13/2.14), so the venv holds the CUDA libraries: ~8.5 GB, ~4 min to install
from an empty pip cache (measured: plugins/lerobot/README.md, "The lerobot venv"). It is kept apart
from arena-core's interpreter and from every simulator venv (ManiSkill wants torch 2.13 and
``numpy<2``). The pins live once, in the plugin's ``model`` extra.
"""

from __future__ import annotations

from arena.venvs import VenvSpec

LEROBOT_VENV = VenvSpec(
    name="lerobot",
    summary="LeRobot 0.4.4 with torch 2.10.0 (the CUDA build; it runs on the CPU too), for `arena serve lerobot`: ~8.5 GB",
    python=">=3.10",  # lerobot 0.4.4's requires-python
    # gym-pusht too (extra ``sim``, ~360 MB), as ``lerobot[pusht]`` has it: LeRobot's own PushT
    # env runs here, for lerobot-eval-style checks against arena's ``pusht`` environment
    distributions=("arena-plugin-lerobot[model,sim]",),
)
