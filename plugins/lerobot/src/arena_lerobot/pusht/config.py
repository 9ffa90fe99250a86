"""Options of a PushT run (``environment: {type: pusht, obs_type: pixels_agent_pos}``).

Importable without the simulator: arena's own interpreter validates and plans PushT runs
(``arena validate``, ``--dry-run``, Slurm, OSMO) with only arena-core installed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from arena.envs.base import EnvironmentConfig

#: gym-pusht's registered id (the only task of the benchmark).
GYM_ID = "gym_pusht/PushT-v0"
#: gym-pusht's observation types (its ``obs_type`` argument), all accepted here.
OBS_TYPES = ("pixels", "pixels_agent_pos", "state", "environment_state_agent_pos")
#: Sent to language-conditioned policies. gym-pusht has no instruction: lerobot-eval sends ""
#: for it (``lerobot.envs.utils.add_envs_task``), which ``instruction: ""`` reproduces.
DEFAULT_INSTRUCTION = "Push the T-shaped block onto the T-shaped target."

ObsType = Literal["pixels", "pixels_agent_pos", "state", "environment_state_agent_pos"]


class PushTConfig(EnvironmentConfig):
    """Options of a ``pusht`` run; every field has a default."""

    obs_type: ObsType = Field(
        "pixels_agent_pos",
        description="gym-pusht's observation type: pixels (image), pixels_agent_pos (image + agent "
        "position; LeRobot's default), state (agent x, y, block x, y, angle), environment_state_agent_pos "
        "(the T's 8 keypoints + agent position)",
    )
    observation_width: int = Field(96, ge=16, le=1024, description="width of camera_obs['pixels'] in pixels (gym-pusht's 96)")
    observation_height: int = Field(96, ge=16, le=1024, description="height of camera_obs['pixels'] in pixels (gym-pusht's 96)")
    visualization_width: int = Field(680, ge=16, le=2048, description="width of video frames (gym-pusht's render(), 680)")
    visualization_height: int = Field(680, ge=16, le=2048, description="height of video frames (gym-pusht's render(), 680)")
    instruction: str = Field(
        DEFAULT_INSTRUCTION,
        description="language instruction sent to the policy; '' is what lerobot-eval sends for PushT",
    )

    def task_name(self) -> str:
        """``PushT-v0``: gym-pusht has one task."""
        return "PushT-v0"

    @property
    def has_pixels(self) -> bool:
        """Whether the observation holds the image (``pixels``, ``pixels_agent_pos``)."""
        return self.obs_type.startswith("pixels")
