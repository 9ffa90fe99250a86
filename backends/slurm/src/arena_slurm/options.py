"""``launch.slurm``: where and how the Slurm backend submits an experiment's runs.

Resources describe the *runner* (the simulator and policy client). A run's policy server
takes its resources from its ServerTask (``resources.cpu``, ``gpu``, ``memory``): in the
``same-allocation`` layout they are added to the runner's, in the ``hetjob`` layout they form
the job's first component (facts on het jobs: ``slurm.schedmd.com/heterogeneous_jobs.html``).

Binding: in ``same-allocation`` server and runner run on the same node, so the server binds
loopback and nothing else on the network reaches it; in ``hetjob`` they are on different
nodes and the server must bind all interfaces (``server_bind`` overrides either, visibly).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from arena.errors import short_repr
from arena.launch.base import BackendOptions

#: Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (sbatch(1), --time).
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^(UNLIMITED|INFINITE)$")
#: ``SRC:DST[:FLAGS]`` as pyxis reads ``--container-mounts`` (NVIDIA/pyxis README).
_MOUNT = re.compile(r"^[^:,\s]+(:[^:,\s]+(:[^:,\s]+)?)?$")
#: Partition, account and QOS names (comma-separated lists included).
_WORD = re.compile(r"[A-Za-z0-9_.,:+-]+")


def time_seconds(value: str | None) -> int | None:
    """Seconds of a Slurm time limit (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``,
    sbatch(1) ``--time``); ``None`` for unset or unlimited."""
    if value is None or not _TIME.match(value) or value in ("UNLIMITED", "INFINITE"):
        return None
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        h, m, sec = (parts + [0, 0])[:3]
    elif len(parts) == 3:  # H:M:S
        h, m, sec = parts
    else:  # M, M:S
        h, m, sec = 0, parts[0], parts[1] if len(parts) > 1 else 0
    return ((int(days or 0) * 24 + h) * 60 + m) * 60 + sec



def _matching(value: str | None, pattern: re.Pattern[str], message: str) -> str | None:
    """``value`` when it is ``None`` or all of it matches ``pattern``.

    Raises:
        ValueError: ``message`` with the value (shortened) in place of ``{}``.
    """
    if value is not None and not pattern.fullmatch(value):
        raise ValueError(message.format(short_repr(value)))
    return value

class SlurmOptions(BackendOptions):
    """Options of the ``slurm`` launch backend (``launch.slurm`` in the experiment file)."""

    partition: str | None = Field(None, description="partition of the run jobs (sbatch --partition)")
    server_partition: str | None = Field(
        None, description="hetjob layout: partition of the server component (default: partition)"
    )
    account: str | None = Field(None, description="sbatch --account")
    qos: str | None = Field(None, description="sbatch --qos")
    time: str | None = Field(
        None, description="time limit of each run job: minutes, H:M:S or D-H:M:S; a job runs every run of its server "
        "group one after the other, so the limit covers them all (or split them with shards)",
    )
    time_signal_s: int = Field(
        90, ge=10, le=65535,
        description="seconds before a job's time limit Slurm signals it (--signal=B:USR1@N) so the run stops and "
        "records why (Slurm may signal up to 60 s earlier)",
    )
    nodes: int = Field(1, ge=1, description="nodes of the runner (the runner step uses the first)")
    gpus: int = Field(0, ge=0, description="GPUs of the runner (rendering simulators); the server's come from its task")
    cpus: int = Field(2, ge=1, description="CPU cores of the runner step")
    memory: float | None = Field(
        None, gt=0,
        description="GiB of host memory of the runner step; with a server whose task declares its memory the job "
        "asks for the sum (--mem; null here: 16 GiB for the runner); null without a server, or a server that "
        "declares none: the partition's default",
    )
    container_mounts: list[str] = Field(
        default_factory=list, description="pyxis mounts SRC:DST[:FLAGS] for server and runner containers"
    )
    runner_image: str | None = Field(
        None, description="container image of the runner steps (pyxis); null: run arena on the node itself"
    )
    containers: bool = Field(
        True, description="run ServerTask images with pyxis; false: run their local_command on the node"
    )
    extra_sbatch: list[str] = Field(
        default_factory=list, description="extra #SBATCH lines, e.g. '--constraint=h100' or '--exclusive'"
    )
    setup: list[str] = Field(
        default_factory=list, description="shell commands run first in every job (module loads, venv activation)"
    )
    layout: Literal["same-allocation", "hetjob"] = Field(
        "same-allocation", description="server and runner steps in one allocation, or a heterogeneous job"
    )
    shards: int | dict[str, int] = Field(
        1, description="job-array elements per run (an int for every run, or run name -> count)"
    )
    array_parallelism: int | None = Field(None, ge=1, description="at most this many shards of a run at once (--array=...%P)")
    work: Literal["queue", "static"] = Field(
        "queue", description="queue: a run's jobs (its shards) claim episodes from OUTPUT_DIR/queue.sqlite with a lease, so "
        "a killed or slow job's episodes go to the others (the output folder's file system needs working POSIX locks: "
        "local disks, NFSv4, Lustre with flock); static: shard K runs the episodes i with i % shards == K",
    )
    lease_s: float = Field(
        30.0, gt=0, description="with work: queue, seconds an episode's lease lasts without renewal: the episodes of a "
        "job killed mid-run go back to the queue after at most this long",
    )
    arena: str = Field("arena", description="command that runs arena on the nodes and in the runner image")
    python: str = Field(
        "python3",
        description="fills {python} of a ServerTask's local_command; unset, a task that names a venv "
        "(ServerTask.venv) gets that venv's interpreter at its path on this machine (a shared file system)",
    )
    server_bind: str | None = Field(
        None,
        description="address the policy server binds to ({host} of its command); null: 127.0.0.1 when server and "
        "runner share a node (same-allocation), 0.0.0.0 in a hetjob (exposed: arena's own server then requires a "
        "per-job API key)",
    )
    server_restarts: int = Field(
        2, ge=0, description="times a policy server that exits while the runner still needs it is restarted (same "
        "port); then the run fails with the cause the server log states",
    )
    server_stop_grace_s: int = Field(
        30, ge=0, le=3600, description="seconds a stopping policy server gets after SIGTERM before SIGKILL"
    )
    job_name_prefix: str = Field("arena", description="job names are <prefix>-<experiment>-<run>")
    poll_interval_s: float = Field(10.0, gt=0, description="seconds between squeue polls while `--wait`ing")

    @field_validator("partition", "server_partition", "account", "qos")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        # these become `#SBATCH --partition=VALUE` lines: a space or a line break would start another
        return _matching(value, _WORD, "{} is not a Slurm name (letters, digits and _ . , : + - only)")

    @field_validator("arena")
    @classmethod
    def _a_command(cls, value: str) -> str:
        import shlex

        try:
            words = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"arena {short_repr(value)} is not a shell command line ({exc})") from None
        if not words:
            raise ValueError("arena is empty: give the command that runs arena on the nodes, e.g. 'arena'")
        return value

    @field_validator("time")
    @classmethod
    def _slurm_time(cls, value: str | None) -> str | None:
        return _matching(value, _TIME, "time {} is not a Slurm time limit (minutes, H:M:S or D-H:M:S)")

    @field_validator("container_mounts")
    @classmethod
    def _mounts(cls, value: list[str]) -> list[str]:
        for mount in value:
            _matching(mount, _MOUNT, "container mount {} is not SRC[:DST[:FLAGS]] (one mount per item)")
        return value

    @field_validator("extra_sbatch")
    @classmethod
    def _sbatch_lines(cls, value: list[str]) -> list[str]:
        lines = []
        for line in value:
            if "\n" in line or "\r" in line:
                raise ValueError(f"extra_sbatch line {short_repr(line)} holds a line break; give one option per item")
            line = line.strip()
            if line.startswith("#SBATCH"):
                line = line[len("#SBATCH"):].strip()
            if not line.startswith("-"):
                raise ValueError(f"extra_sbatch line {short_repr(line)} is not an sbatch option (it must start with '-')")
            lines.append(line)
        return lines

    @field_validator("setup")
    @classmethod
    def _setup_lines(cls, value: list[str]) -> list[str]:
        for line in value:
            if "\n" in line or "\r" in line:
                raise ValueError(f"setup command {short_repr(line)} holds a line break; give one command per item")
        return value

    @model_validator(mode="after")
    def _time_longer_than_its_signal(self) -> SlurmOptions:
        seconds = time_seconds(self.time)
        if seconds is not None and seconds <= self.time_signal_s:
            raise ValueError(
                f"time {self.time!r} ({seconds} s) is not longer than time_signal_s={self.time_signal_s}: Slurm would "
                "signal the job's time limit as it starts; lengthen time or lower time_signal_s"
            )
        return self

    @model_validator(mode="after")
    def _shards_valid(self) -> SlurmOptions:
        counts = self.shards.values() if isinstance(self.shards, dict) else [self.shards]
        if any(n < 1 for n in counts):
            raise ValueError("shards must be at least 1")
        return self

    def shards_of(self, run: str) -> int:
        """Number of job-array elements of ``run`` (1: a plain job)."""
        if isinstance(self.shards, dict):
            return self.shards.get(run, 1)
        return self.shards
