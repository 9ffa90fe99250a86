"""Options of a ManiSkill3 run (``environment: {type: maniskill, task: PickCube-v1}``).

Importable without ManiSkill: arena's own interpreter validates and plans ManiSkill runs
(``arena validate``, ``--dry-run``, Slurm, OSMO) with only arena-core installed.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, field_validator

from arena.envs.base import EnvironmentConfig
from arena_maniskill.catalog import TASKS, check_task_id, task_spec

#: ``obs_mode`` -> the obs_mode ManiSkill is built with (``state_dict``: the state as a dict, so
#: each part keeps its name; ``rgb``: ManiSkill's camera mode, which adds the robot's
#: proprioception and the task's non-privileged extras, e.g. ``tcp_pose``, ``goal_pos``).
MANISKILL_OBS_MODES: dict[str, str] = {"state": "state_dict", "rgb": "rgb", "rgb+state": "state_dict+rgb"}

#: Names the ``privileged`` option accepts -> ``module:factory`` of the provider (see
#: :meth:`arena_maniskill.env.ManiSkillEnvironment.privileged_observation`). Code of this
#: plugin only: an experiment cannot name other code here.
PRIVILEGED_PROVIDERS: dict[str, str] = {
    "motion_plan": "arena_maniskill.planner:privileged_provider",
}


class ManiSkillConfig(EnvironmentConfig):
    """Options of a ``maniskill`` run; every field has a default but ``task``."""

    task: str = Field(description="a ManiSkill3 gym id, e.g. PickCube-v1 (the offline eight: see the plugin's README)")
    obs_mode: Literal["state", "rgb", "rgb+state"] = Field(
        "rgb",
        description="state: the full state (privileged: object poses) under policy/; rgb: every camera of the "
        "task as camera_obs/<camera>_rgb plus proprioception; rgb+state: both",
    )
    control_mode: str = Field(
        "pd_joint_pos",
        description="ManiSkill controller the actions drive: pd_joint_pos (absolute joint targets + gripper: what "
        "ManiSkill's motion planners and joint-position models such as openpi's DROID checkpoints emit), "
        "pd_ee_delta_pose (end-effector deltas), pd_joint_delta_pos, ... (the robot's controllers)",
    )
    sim_backend: Literal["cpu", "physx_cuda"] = Field(
        "cpu",
        description="cpu: one env per worker process (the run's envs spread over workers); physx_cuda: one worker "
        "holding all envs, vectorized by ManiSkill on the GPU (needs a CUDA torch in the venv)",
    )
    robot: str | None = Field(None, description="ManiSkill robot uid (robot_uids), e.g. panda; null: the task's default")
    image_height: int = Field(128, ge=16, le=2048, description="camera image height in pixels")
    image_width: int = Field(128, ge=16, le=2048, description="camera image width in pixels")
    asset_dir: str | None = Field(
        None,
        description="ManiSkill's MS_ASSET_DIR (it keeps downloads under its data/) for tasks that need downloaded "
        "assets (SimplerEnv Bridge, YCB, ReplicaCAD); null: $MS_ASSET_DIR, else ~/.maniskill",
    )
    instruction: str | None = Field(None, description="language instruction sent to the policy (default: the catalog's)")
    fresh_scene: bool = Field(
        True,
        description="cpu backend: start every episode from a rebuilt scene (reset with reconfigure), so "
        "an episode does not depend on what its env ran before (about 0.3-1 s per episode); false: "
        "ManiSkill's plain reset(seed), faster, but PhysX state of the previous episode carries over",
    )
    privileged: list[str] = Field(
        default_factory=list,
        description=f"privileged observations computed in the worker, under observation['privileged'] "
        f"(for scripted experts): {', '.join(PRIVILEGED_PROVIDERS)}",
    )

    @field_validator("task")
    @classmethod
    def _gym_id(cls, value: str) -> str:
        return check_task_id(value)

    @field_validator("asset_dir")
    @classmethod
    def _asset_dir(cls, value: str | None) -> str | None:
        return None if value is None else os.path.expanduser(value)

    @field_validator("privileged")
    @classmethod
    def _known_privileged(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in PRIVILEGED_PROVIDERS:
                raise ValueError(f"unknown privileged observation {name!r}; known: {', '.join(PRIVILEGED_PROVIDERS)}")
        if len(set(value)) != len(value):
            raise ValueError(f"privileged lists an entry twice: {value}")
        return value

    def task_instruction(self) -> str:
        """The language instruction of this run (``instruction``, else the catalog's, else the id)."""
        spec = task_spec(self.task)
        return self.instruction or (spec.instruction if spec else self.task)

    def max_episode_steps(self) -> int | None:
        """The task's registered step limit when the catalog knows it, else ``None``."""
        spec = task_spec(self.task)
        return spec.max_episode_steps if spec else None

    def wants_cameras(self, cameras: bool = False) -> bool:
        """Whether the envs render (``obs_mode`` with rgb, or the rollout asked for cameras)."""
        return cameras or self.obs_mode != "state"

    def maniskill_obs_mode(self, cameras: bool = False) -> str:
        """The ``obs_mode`` ManiSkill is built with (:data:`MANISKILL_OBS_MODES`); ``state`` with
        ``cameras`` asked for by the rollout becomes ``rgb+state``."""
        mode = "rgb+state" if (self.obs_mode == "state" and cameras) else self.obs_mode
        return MANISKILL_OBS_MODES[mode]


__all__ = ["MANISKILL_OBS_MODES", "PRIVILEGED_PROVIDERS", "TASKS", "ManiSkillConfig"]
