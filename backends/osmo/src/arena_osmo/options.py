"""``launch.osmo``: the options of the OSMO launch backend.

Every option here changes the rendered workflows or the ``osmo`` command lines (a test sets
each one and checks); nothing is accepted and ignored. Memory and storage are in GiB.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.errors import short_repr
from arena.launch.base import BackendOptions
from arena.servertask import require_env_name

_DURATION = re.compile(r"^[0-9]+(\.[0-9]+)?[smhdw]$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlatformSpec(_Strict):
    """What one node of an OSMO platform offers (user configuration; OSMO does not say)."""

    gpu_type: str | None = Field(None, description="GPU model of the node, e.g. H100 or L40S; null: no GPU")
    gpus: int = Field(0, ge=0, description="GPUs per node")
    gpu_memory_gb: float | None = Field(None, ge=0, description="GiB of memory per GPU")
    memory_gb: float = Field(gt=0, description="GiB of host memory per node")
    cpus: int = Field(gt=0, description="CPU cores per node")
    arch: str | None = Field(None, description="node architecture, e.g. linux/amd64")


class Placement(_Strict):
    """Where one run (or every run whose server task has this name) goes."""

    pool: str | None = Field(None, description="OSMO pool of the run's workflow; null: launch.osmo.pool")
    platform: str | None = Field(
        None, description="platform of the run's policy server; null: the first platform of the pool that fits"
    )


class RunnerResources(_Strict):
    """The runner task of every run (``arena run-one`` with the simulator)."""

    cpu: int = Field(8, ge=1, description="CPU cores")
    gpu: int = Field(1, ge=0, description="GPUs (1: MuJoCo renders with EGL; 0: with OSMesa on the CPU)")
    memory_gb: float = Field(32.0, gt=0, description="GiB of host memory")
    storage_gb: float = Field(50.0, gt=0, description="GiB of disk (records, videos)")
    platform: str | None = Field(None, description="null: the first platform of the pool that fits")


class CredentialRef(_Strict):
    """One secret as an environment variable, read from an OSMO credential (``osmo credential set``)."""

    credential: str = Field(min_length=1, description="name of the OSMO credential")
    key: str = Field(min_length=1, description="key inside the credential")


class OsmoOptions(BackendOptions):
    """Options of the ``osmo`` launch backend (``launch.osmo.*``)."""

    pool: str | None = Field(None, description="OSMO pool of every workflow (required; placement may move runs)")
    platforms: dict[str, dict[str, PlatformSpec]] = Field(
        default_factory=dict,
        description="what each pool offers: {POOL: {PLATFORM: {gpu_type, gpus, gpu_memory_gb, memory_gb, cpus}}}",
    )
    placement: dict[str, Placement] = Field(
        default_factory=dict,
        description="per run name (wins) or server task name: {pool, platform} of its server",
    )
    runner_image: str | None = Field(None, description="image with arena, its plugins and MuJoCo (docker/runner.Dockerfile)")
    output_url: str | None = Field(
        None,
        description="where each runner publishes its run directory (as <output_url>/<run>), e.g. "
        "s3://bucket/arena/{{workflow_id}}",
    )
    publish_interval: str = Field(
        "5m", description="how often a runner uploads its records while it runs (OSMO checkpoint frequency); "
        "it uploads once more when it ends"
    )
    workflow_name: str | None = Field(
        None,
        pattern=r"^[A-Za-z]([A-Za-z0-9_-]{0,50}[A-Za-z0-9])?$",
        description="workflow name; null: arena-<experiment>; split workflows get -1, -2, ...",
    )
    priority: Literal["HIGH", "NORMAL", "LOW"] = Field("NORMAL", description="osmo workflow submit --priority")
    labels: dict[str, str] = Field(default_factory=dict, description="workflow labels (at most 16)")
    exec_timeout: str = Field("1d", description="longest a group may run, e.g. 12h")
    queue_timeout: str = Field("2d", description="longest a group may wait for resources")
    max_tasks_per_workflow: int = Field(
        100, ge=2, le=100, description="tasks per workflow; larger experiments are split"
    )
    runner: RunnerResources = Field(default_factory=RunnerResources)
    server_storage_gb: float = Field(
        50.0, gt=0, description="GiB of disk of a policy server task whose ServerTask does not size it (resources.storage)"
    )
    credentials: dict[str, CredentialRef] = Field(
        default_factory=dict,
        description="{ENV_NAME: {credential, key}}: where each secret comes from; a runner gets those its run names "
        "(policy api_key_env, the run's credentials), a server those its ServerTask.secrets name",
    )
    poll_interval_s: float = Field(30.0, gt=0, description="seconds between status queries of `arena run --wait`")

    @field_validator("exec_timeout", "queue_timeout", "publish_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise ValueError(f"{short_repr(value)} is not a duration such as '30m', '12h' or '1d'")
        return value

    @field_validator("credentials")
    @classmethod
    def _env_names(cls, value: dict[str, CredentialRef]) -> dict[str, CredentialRef]:
        for name in value:
            require_env_name(name, "credential")
        return value
