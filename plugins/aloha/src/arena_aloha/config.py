"""Options of an ALOHA sim run (``environment: {type: aloha, task: transfer_cube}``).

Importable without the simulator: arena's own interpreter validates and plans ALOHA runs
(``arena validate``, ``--dry-run``, Slurm, OSMO) with only arena-core installed.
"""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import Field, field_validator

from arena.envs.base import EnvironmentConfig

#: Task -> (gym-aloha's scene file, the instruction sent to language-conditioned policies).
#: "Transfer cube" is the prompt openpi's ``pi0_aloha_sim`` was trained with (its config's
#: ``default_prompt``); insertion has no published prompt, so it says what the task is.
TASKS: dict[str, tuple[str, str]] = {
    "transfer_cube": ("bimanual_viperx_transfer_cube.xml", "Transfer cube"),
    "insertion": ("bimanual_viperx_insertion.xml", "Insert the peg into the socket"),
}
#: gym-aloha's registered ids, accepted as task names.
_GYM_IDS = {
    "AlohaTransferCube-v0": "transfer_cube",
    "AlohaInsertion-v0": "insertion",
}

#: ALOHA camera names (the layout openpi's ALOHA configs read) -> the scene's own camera.
#: ``cam_high`` is the benchmark's only exposed camera (``top``, over the table); ``cam_low`` is
#: the fixed camera in front of the table (``angle``); the wrist cameras ride on the grippers.
ALOHA_CAMERAS: dict[str, str] = {
    "cam_high": "top",
    "cam_low": "angle",
    "cam_left_wrist": "left_wrist",
    "cam_right_wrist": "right_wrist",
}
#: Every camera of gym-aloha's scene (``scene.xml`` and the two arms), usable by its own name.
SCENE_CAMERAS = ("left_pillar", "right_pillar", "top", "angle", "front_close", "left_wrist", "right_wrist")


def canonical_task(task: str) -> str:
    """``transfer_cube`` / ``insertion`` for a task name or gym-aloha id; else ``ValueError``."""
    key = task.strip()
    key = _GYM_IDS.get(key.removeprefix("gym_aloha/"), key).replace("-", "_")
    if key in TASKS:
        return key
    close = difflib.get_close_matches(key, list(TASKS), n=2, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known tasks: {', '.join(TASKS)}"
    raise ValueError(f"unknown ALOHA sim task {task!r}; {hint}")


def scene_camera(name: str) -> str:
    """The scene camera a ``cameras`` entry renders (``cam_high`` -> ``top``); else ``ValueError``."""
    if name in ALOHA_CAMERAS:
        return ALOHA_CAMERAS[name]
    if name in SCENE_CAMERAS:
        return name
    known = [*ALOHA_CAMERAS, *SCENE_CAMERAS]
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"known cameras: {', '.join(known)}"
    raise ValueError(f"unknown ALOHA camera {name!r}; {hint}")


class AlohaConfig(EnvironmentConfig):
    """Options of an ``aloha`` run; every field has a default but ``task``."""

    task: str = Field(description="transfer_cube or insertion (gym-aloha's AlohaTransferCube-v0 / AlohaInsertion-v0)")
    cameras: list[str] = Field(
        default_factory=lambda: ["cam_high"],
        description="cameras rendered into camera_obs as <name>_rgb, only these and only when listed: "
        "cam_high, cam_low, cam_left_wrist, cam_right_wrist, or a scene camera by its own name; "
        "[] for state-only policies (a step then costs well under a millisecond instead of tens)",
    )
    image_height: int = Field(480, ge=16, le=2160, description="camera image height in pixels (gym-aloha's 480)")
    image_width: int = Field(640, ge=16, le=3840, description="camera image width in pixels (gym-aloha's 640)")
    instruction: str | None = Field(
        None, description="language instruction sent to the policy (default: 'Transfer cube' / 'Insert the peg into the socket')"
    )
    action_dtype: Literal["float64", "float32"] = Field(
        "float64",
        description="dtype the actions reach gym-aloha in: float64 as openpi's ALOHA client hands them; float32 as "
        "lerobot-eval does (its policy's float32 tensor as numpy), for LeRobot-trained policies: gym-aloha computes "
        "the gripper targets in the action's dtype, so the two differ in the last bits",
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return canonical_task(value)

    @field_validator("cameras")
    @classmethod
    def _known_cameras(cls, value: list[str]) -> list[str]:
        for name in value:
            scene_camera(name)
        if len(set(value)) != len(value):
            raise ValueError(f"cameras lists a camera twice: {value}")
        return value

    def task_instruction(self) -> str:
        """The language instruction of this run (``instruction`` or the task's own)."""
        return self.instruction or TASKS[self.task][1]
