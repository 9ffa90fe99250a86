"""The ``isaaclab`` environment's options (validated on the arena side; no Isaac Lab import).

Exactly one of three sources names what to build:

- ``task``: a registered Isaac Lab gym id (``Isaac-Cartpole``, ``Isaac-Reach-Franka``, this
  plugin's ``Arena-Reach-Cube-v0``), resolved with Isaac Lab's own preset machinery;
- ``env_cfg``: ``package.module:Cfg``, a ``ManagerBasedRLEnvCfg`` class of the user's. Loading
  it imports (runs) that module, so it is a code reference: arena loads it only with the
  experiment's opt-in (``--allow-import package`` or ``$ARENA_ALLOW_IMPORTS``), like a
  ``type: package.module:Class``;
- ``isaaclab_arena``: an IsaacLab-Arena environment (its registered environment name, the
  embodiment and its other options), built through IsaacLab-Arena's ``ArenaEnvBuilder``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.envs.base import EnvironmentConfig

_CODE_REFERENCE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


class IsaacLabArenaConfig(BaseModel):
    """An IsaacLab-Arena environment: what its ``EnvironmentRegistry`` and ``ArenaEnvBuilder`` take."""

    model_config = ConfigDict(extra="forbid")

    environment: str = Field(
        description="registered IsaacLab-Arena environment, e.g. pick_and_place_maple_table"
    )
    embodiment: str | None = Field(
        None, description="embodiment asset, e.g. droid_abs_joint_pos (null: the environment's default)"
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="other fields of the environment's config: scene objects (pick_up_object, "
        "destination_location, ...), episode_length_s, ...",
    )
    env_spacing: float = Field(5.0, gt=0, description="metres between the envs' origins")
    solve_relations: bool = Field(True, description="place objects by their spatial relations before building")

    def environment_options(self) -> dict[str, Any]:
        """The environment config's fields: ``options`` plus ``embodiment`` when given."""
        out = dict(self.options)
        if self.embodiment is not None:
            out["embodiment"] = self.embodiment
        return out


class IsaacLabConfig(EnvironmentConfig):
    """Options of ``environment: {type: isaaclab, ...}`` (see the plugin's README).

    Seeding (README "Seeds"): Isaac Lab's random state is global, so each episode's reset runs
    alone, seeded with the episode's seed; what that does and does not fix is written into
    each record (``env_extras.seeding``).
    """

    task: str | None = Field(None, description="registered Isaac Lab gym id, e.g. Isaac-Cartpole")
    env_cfg: str | None = Field(
        None,
        description="package.module:Cfg of a ManagerBasedRLEnvCfg class (a code reference: needs "
        "--allow-import package)",
    )
    isaaclab_arena: IsaacLabArenaConfig | None = Field(
        None, description="an IsaacLab-Arena environment (needs isaaclab_arena in the worker's venv)"
    )
    device: str | None = Field(
        None, description="simulation device: cpu, cuda or cuda:N; null: cuda:0 when there is a GPU, else cpu"
    )
    physics: str = Field(
        "newton_mjwarp",
        description="physics preset: newton_mjwarp (Newton / MuJoCo-Warp, runs without Isaac Sim), "
        "physx or isaacsim_physx (need Isaac Sim), or another preset the task defines",
    )
    presets: list[str] = Field(default_factory=list, description="further Isaac Lab preset selectors of the task")
    asset_root: str | None = Field(
        None,
        description="Isaac asset root (ISAACSIM_ASSET_ROOT: a local mirror for offline use); null: "
        "Isaac Lab's default (NVIDIA's content servers), or for Arena-Reach-Cube-v0 its own assets",
    )
    cameras: bool = Field(True, description="render camera sensors into camera_obs (false removes them)")
    camera_width: int | None = Field(None, ge=8, le=4096, description="pixels; null: each camera's own")
    camera_height: int | None = Field(None, ge=8, le=4096, description="pixels; null: each camera's own")
    success_term: str | None = Field(
        "success", description="termination term that means success (info['success']); null: none"
    )
    failure_terms: list[str] | None = Field(
        None,
        description="termination terms that end an episode as a failure; null: every term that is "
        "neither the success term nor a time-out",
    )
    task_description: str | None = Field(
        None, description="instruction sent to the policy; null: the env config's task_description"
    )
    build_seed: int = Field(0, description="seed of the env's construction (start-up randomization)")
    kernel_cache_dir: str | None = Field(
        None,
        description="Warp kernel cache (WARP_CACHE_PATH); null: $ARENA_WARP_CACHE, else warp-kernels "
        "inside the worker's venv (kernels compile once per venv, never into ~/.cache)",
    )

    @model_validator(mode="after")
    def _one_source(self) -> IsaacLabConfig:
        given = [k for k in ("task", "env_cfg", "isaaclab_arena") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of task (a registered Isaac Lab gym id), env_cfg (package.module:Cfg) "
                f"or isaaclab_arena; got {', '.join(given) or 'none'}"
            )
        return self

    @field_validator("env_cfg")
    @classmethod
    def _code_reference(cls, value: str | None) -> str | None:
        if value is not None and not _CODE_REFERENCE.match(value):
            raise ValueError(f"env_cfg must be package.module:Class, got {value!r}")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        if value is not None and not _DEVICE.match(value):
            raise ValueError(f"device must be cpu, cuda or cuda:N, got {value!r}")
        return value

    def task_name(self) -> str | None:
        if self.task is not None:
            return self.task
        if self.env_cfg is not None:
            return self.env_cfg
        return self.isaaclab_arena.environment if self.isaaclab_arena is not None else None

    def code_references(self) -> dict[str, str]:
        """``{key: "package.module:Class"}``: the code references of this config, whose modules
        building the env imports (``env_cfg``); arena's loader allows them only on opt-in."""
        return {"env_cfg": self.env_cfg} if self.env_cfg is not None else {}
