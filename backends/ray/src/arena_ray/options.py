"""``launch.ray``: where the Ray cluster is and how a run's work is spread over it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from arena.launch.base import BackendOptions


class RayOptions(BackendOptions):
    address: str = Field(
        "local",
        description="local: start a Ray instance on this machine, bound to loopback, stopped at the end; "
        "auto: the cluster this machine already belongs to (`ray start`, $RAY_ADDRESS); ray://HOST:PORT: a Ray "
        "client connection (needs ray[client]); HOST:PORT: a head's GCS address",
    )
    nodes: int = Field(
        1, ge=1, description="`arena node` tasks per server group (the runs sharing one server task; a run without "
        "a server is a group of its own), each placed by Ray and starting the server once on its node; with work: "
        "queue they share the runs' episodes (a lost node's episodes go to the others), with work: static each runs "
        "shard K of nodes",
    )
    runners: int = Field(
        1, ge=1, description="runners of a group's runs at the same time in one task, beside its one server (each "
        "takes runner_cpus)",
    )
    work: Literal["queue", "static"] = Field(
        "queue", description="queue: runners claim episodes from OUTPUT_DIR/queue.sqlite (the output folder must be on "
        "a file system every node reaches); static: episode i runs in shard i % nodes",
    )
    runner_cpus: float = Field(1.0, gt=0, description="CPUs a runner takes besides its policy server's (Ray num_cpus)")
    lease_s: float = Field(
        30.0, gt=0, description="seconds an episode's lease lasts without renewal: a node lost mid-episode gives its "
        "episodes back after at most this long",
    )
    arena: list[str] | None = Field(
        None, description="the command that runs arena on the nodes; null: this Python's `-m arena` (same paths on "
        "every node: a shared file system or one image)",
    )
    local_cpus: int | None = Field(None, ge=1, description="CPUs of the instance `address: local` starts; null: all")
    poll_interval_s: float = Field(1.0, gt=0, description="seconds between looks at the tasks")
    head_timeout_s: float = Field(
        30.0, gt=0, description="seconds the cluster's head (its GCS address) may stay unreachable before the runs "
        "fail naming it (at once when a task ends with its node as the head stops answering)",
    )
    cancel_grace_s: float = Field(30.0, ge=0, description="seconds a cancelled task's `arena node` has to record why")
    image: str = Field("rayproject/ray:2.60.0-py311", description="the image of the KubeRay RayJob --dry-run prints")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("empty: use local, auto, ray://HOST:PORT or HOST:PORT")
        return value.strip()
