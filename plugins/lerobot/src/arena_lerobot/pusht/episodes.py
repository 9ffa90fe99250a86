"""Which episodes a PushT run plays, declared the same way by both wrappers of gym-pusht: the
native ``pusht`` environment and the ``lerobot_env`` bridge's ``{type: pusht}`` (LeRobot's
``PushtEnv``, which makes the same gym-pusht env). Both reset episode seed ``s`` with gym-pusht's
``reset(seed=s)``, so for equal declarations the same seed is the same episode
(``arena.outputs.fingerprint.EQUIVALENCE_KEY``): ``arena compare`` pairs their runs."""

from __future__ import annotations

from typing import Any


def pusht_episodes(version: str | None, obs_type: str, image_size: list[int] | None, step_limit: int) -> dict[str, Any]:
    """The declaration (the fingerprint's ``episodes_as``): gym-pusht's version, task, seeding,
    observation type and image size ``[height, width]`` (``None`` without pixels), step limit."""
    return {
        "simulator": f"gym-pusht {version}",
        "task": "PushT-v0",
        "seeding": "gym-pusht reset(seed=s)",
        "obs_type": obs_type,
        "image_size": image_size,
        "step_limit": int(step_limit),
    }
