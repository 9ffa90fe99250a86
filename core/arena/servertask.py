"""``ServerTask``: a description of the policy server a remote client needs (not a process).

Launch backends turn it into a subprocess (local), an ``srun`` step (Slurm) or a task (OSMO).
``command`` runs inside ``image``; ``local_command`` runs on this machine. Both are templated
with ``{host}`` (the bind address), ``{port}``, ``{python}`` (this interpreter) and any key
of ``fields``. ``checkpoint`` and ``revision`` (templated with ``fields`` too) say which model
the server loads; every run's ``run_result.json`` records them with the image and the
server's metadata frame, so results name the model that answered.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from arena.errors import short_repr

_READINESS = re.compile(r"^(websocket|tcp|zmq-ping|http:/\S*)$")
#: A task name becomes a log file name and a word of job scripts.
_TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: Environment variable names, as POSIX shells accept them (they enter `export NAME=...`).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def require_env_name(name: str, what: str) -> str:
    """``name`` when it is an environment variable name (it enters ``export NAME=…`` lines
    and container flags of generated scripts).

    Raises:
        ValueError: it is not; the message says ``what`` it was.
    """
    if not ENV_NAME.fullmatch(name):
        raise ValueError(f"{what} {short_repr(name)} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return name


class ServerResources(BaseModel):
    """What one server instance needs. Memory is in GiB."""

    model_config = ConfigDict(extra="forbid")

    cpu: int = Field(1, ge=0, description="CPU cores")
    gpu: int = Field(0, ge=0, description="GPUs")
    gpu_memory_gb: float | None = Field(None, ge=0, description="GiB of GPU memory per GPU")
    memory: float | None = Field(None, ge=0, description="GiB of host memory")
    gpu_type: str | None = Field(None, description="e.g. H100")
    platform: str | None = Field(None, description="e.g. linux/amd64")


class ServerTask(BaseModel):
    """The model server of one remote policy, as a backend-neutral description."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="task name, e.g. 'openpi-pi05-droid'")
    image: str | None = Field(None, description="container image of the server")
    command: list[str] = Field(default_factory=list, description="command inside `image`")
    local_command: list[str] | None = Field(None, description="command on this machine")
    port: int = Field(8000, ge=1, le=65535, description="default port; backends may choose another")
    readiness: str = Field(
        "websocket", description="websocket | tcp | zmq-ping | http:<path> (200 on GET)"
    )
    startup_timeout_s: float = Field(120.0, gt=0, description="seconds until ready, else failed")
    resources: ServerResources = Field(default_factory=ServerResources)
    env: dict[str, str] = Field(default_factory=dict, description="environment variables")
    secrets: list[str] = Field(
        default_factory=list, description="names of environment variables passed through by name"
    )
    shareable: bool = Field(True, description="whether several runs or envs may use one instance")
    fields: dict[str, str] = Field(default_factory=dict, description="extra template fields")
    checkpoint: str | None = Field(
        None, description="the checkpoint the server loads (templated like the command, e.g. '{model_path}'), for the record"
    )
    revision: str | None = Field(None, description="the checkpoint's revision or version, if known (templated), for the record")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _TASK_NAME.fullmatch(value):
            raise ValueError(
                f"server task name {short_repr(value)} must be letters, digits, '_', '.' or '-', not starting with '.' or "
                "'-' (it names log files and enters job scripts)"
            )
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            require_env_name(key, "env key")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            require_env_name(name, "secret")
        return value

    @field_validator("readiness")
    @classmethod
    def _known_readiness(cls, value: str) -> str:
        if not _READINESS.match(value):
            raise ValueError(
                f"unknown readiness {short_repr(value)}; expected websocket, tcp, zmq-ping or http:<path>"
            )
        return value

    def render(self, argv: list[str], *, host: str, port: int, python: str = "python") -> list[str]:
        """Fill ``{host}``, ``{port}``, ``{python}`` and ``fields`` into each argument."""
        values = {**self.fields, "host": host, "port": str(port), "python": python}
        return [arg.format_map(values) for arg in argv]

    def model_identity(self) -> dict[str, str | None]:
        """``{"checkpoint", "revision"}`` with ``fields`` filled in: what the server loads,
        for each run's record of the model that answered (``None`` where unknown)."""
        values = {**self.fields, "host": "{host}", "port": "{port}", "python": "{python}"}

        def fill(template: str | None) -> str | None:
            if template is None:
                return None
            try:
                return template.format_map(values)
            except (KeyError, ValueError, IndexError):  # an unknown field: keep it as written
                return template

        return {"checkpoint": fill(self.checkpoint), "revision": fill(self.revision)}

    def identity(self) -> str:
        """A key equal for two tasks that may share one instance (the description, sans name)."""
        return self.model_dump_json(exclude={"name"})


class ServerOverrides(BaseModel):
    """A run's ``server:`` key: overrides of the derived ServerTask, or ``external: true``."""

    model_config = ConfigDict(extra="forbid")

    external: bool = Field(
        False, description="use a server already running at the policy's remote_host:remote_port"
    )
    image: str | None = None
    command: list[str] | None = None
    local_command: list[str] | None = None
    port: int | None = Field(None, ge=1, le=65535)
    readiness: str | None = None
    startup_timeout_s: float | None = Field(None, gt=0)
    resources: dict | None = None
    env: dict[str, str] | None = None
    secrets: list[str] | None = None
    shareable: bool | None = None
    fields: dict[str, str] | None = None
    checkpoint: str | None = None
    revision: str | None = None

    def apply(self, task: ServerTask) -> ServerTask:
        """Return ``task`` with every override that is set."""
        data = task.model_dump()
        for key, value in self.model_dump(exclude={"external"}, exclude_none=True).items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return ServerTask.model_validate(data)


Readiness = Literal["websocket", "tcp", "zmq-ping"]
