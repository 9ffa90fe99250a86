"""``ServerTask``: a description of the policy server a remote client needs (not a process).

Launch backends turn it into a subprocess (local), an ``srun`` step (Slurm) or a task (OSMO).
``command`` runs inside ``image``; ``local_command`` runs on this machine. Both are templated
with ``{host}`` (the bind address), ``{port}``, ``{python}`` (this interpreter, or the
interpreter of the declared venv ``venv`` names: :mod:`arena.venvs`) and any key of ``fields``. ``checkpoint`` and ``revision`` (templated with ``fields`` too) say which model
the server loads; every run's ``run_result.json`` records them with the image and the
server's metadata frame, so results name the model that answered.

Network exposure: the backend chooses the bind address (``{host}``): loopback when server and
simulation share a node, all interfaces where they cannot. A command without ``{host}`` binds
where the server decides (``bind``; openpi's ``serve_policy.py`` has no host option and binds
0.0.0.0). ``api_key_args`` are the arguments that make the server require an API key (arena's
own ``arena serve``: ``--api-key-env {api_key_env}``); a server without them cannot require
one, so when it is exposed anyone who reaches the node can use it
(:mod:`arena.launch.exposure` decides and describes this).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

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
    storage: float | None = Field(
        None, ge=0, description="GiB of local disk (checkpoint downloads, caches); null: the backend's default"
    )
    gpu_type: str | None = Field(None, description="e.g. H100")
    platform: str | None = Field(None, description="e.g. linux/amd64")


class ServerTask(BaseModel):
    """The model server of one remote policy, as a backend-neutral description."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="task name, e.g. 'openpi-pi05-droid'")
    image: str | None = Field(None, description="container image of the server (one the cluster can pull)")
    image_hint: str | None = Field(
        None,
        description="how to get an image when the plugin knows of no public one (image unset): backends that run "
        "containers refuse the task until server.image is set, quoting this",
    )
    command: list[str] = Field(default_factory=list, description="command inside `image`")
    local_command: list[str] | None = Field(None, description="command on this machine")
    venv: str | None = Field(
        None,
        description="a declared venv (arena.venvs; e.g. a servable model's default_venv) whose interpreter fills "
        "{python} of local_command: the local backend's and Slurm's without containers (unless launch.slurm.python "
        "is set); null: arena's own interpreter",
    )
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

    api_key_args: list[str] | None = Field(
        None,
        description="arguments appended to make the server require an API key, templated with {api_key_env} "
        "(the NAME of the variable holding it); null or []: the server cannot require one",
    )
    bind: str | None = Field(
        None, description="address the server binds when its command has no {host}; null: assumed 0.0.0.0"
    )
    gpus: list[str] | None = Field(
        None,
        description="local backend: the GPUs (CUDA indices or UUIDs) this server gets as CUDA_VISIBLE_DEVICES; "
        "null: resources.gpu of the free ones",
    )

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _TASK_NAME.fullmatch(value):
            raise ValueError(
                f"server task name {short_repr(value)} must be letters, digits, '_', '.' or '-', not starting with '.' or "
                "'-' (it names log files and enters job scripts)"
            )
        return value

    @field_validator("env", "secrets")
    @classmethod
    def _variable_names(cls, value: dict[str, str] | list[str], info: ValidationInfo) -> dict[str, str] | list[str]:
        """``env``'s keys and ``secrets`` name environment variables (they enter job scripts)."""
        for name in value:
            require_env_name(name, "env key" if info.field_name == "env" else "secret")
        return value

    @field_validator("readiness")
    @classmethod
    def _known_readiness(cls, value: str) -> str:
        if not _READINESS.match(value):
            raise ValueError(
                f"unknown readiness {short_repr(value)}; expected websocket, tcp, zmq-ping or http:<path>"
            )
        return value

    def render(
        self, argv: list[str], *, host: str, port: int, python: str = "python", api_key_env: str | None = None
    ) -> list[str]:
        """Fill ``{host}``, ``{port}``, ``{python}`` and ``fields`` into each argument; with
        ``api_key_env`` (a variable NAME) ``api_key_args`` are appended, filled with it."""
        values = {**self.fields, "host": host, "port": str(port), "python": python}
        if api_key_env is not None:
            if not self.api_key_args:
                raise ValueError(f"server task '{self.name}' cannot require an API key (it has no api_key_args)")
            if self.api_key_args[0] not in argv:  # a command may already pass one
                argv = [*argv, *self.api_key_args]
            values["api_key_env"] = api_key_env
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

    def bind_address(self, argv: list[str], requested: str) -> str:
        """Where ``argv`` (``command`` or ``local_command``) binds when the backend asks for
        ``requested``: that address if the command takes ``{host}``, else ``bind`` (or
        0.0.0.0: a server that chooses its own address is assumed to listen everywhere)."""
        if any("{host}" in arg for arg in argv):
            return requested
        return self.bind or "0.0.0.0"

    def local_python(self) -> str:
        """What fills ``{python}`` of ``local_command`` on this machine: the interpreter of the
        venv :attr:`venv` names (``arena.venvs.venv_python``; it may not exist yet, see
        :meth:`missing_venv`), else this interpreter."""
        import sys

        if self.venv is None:
            return sys.executable
        from arena.venvs import venv_python

        return str(venv_python(self.venv))

    def missing_program(self, path: str | None = None) -> str | None:
        """Why ``local_command`` cannot start here: its program (a bare name, not ``{python}``)
        is not on ``PATH`` (``path``, default this process's); ``None`` when it is, or when
        the command names a path or an interpreter arena fills in."""
        import shutil

        program = (self.local_command or [""])[0]
        if not program or "{" in program or "/" in program or shutil.which(program, path=path) is not None:
            return None
        return (
            f"`{program}` is not on PATH, and server task '{self.name}' starts with it: install it (or put it on PATH) "
            "before `arena run`, or start the server yourself and set `server: {external: true}`"
        )

    def missing_venv(self) -> str | None:
        """Why :attr:`venv`'s interpreter cannot run ``local_command`` here (it was never
        created: the message names ``arena venv setup NAME``), or ``None``."""
        if self.venv is None:
            return None
        from arena.venvs import venv_dir, venv_python

        if venv_python(self.venv).exists():
            return None
        return (
            f"server task '{self.name}' runs in the venv '{self.venv}', which does not exist ({venv_dir(self.venv)}): "
            f"create it once with `arena venv setup {self.venv}`"
        )

    @property
    def gpu_count(self) -> int:
        """GPUs this server needs: ``len(gpus)`` when pinned, else ``resources.gpu``."""
        return len(self.gpus) if self.gpus is not None else self.resources.gpu

    def identity(self) -> str:
        """A key equal for two tasks that may share one instance (the description, sans name)."""
        return self.model_dump_json(exclude={"name"})


def arena_server_task(
    model: str, *, startup_timeout_s: float = 60.0, options: dict[str, str] | None = None, venv: str | None = None
) -> ServerTask:
    """The task of ``arena serve MODEL`` (a model registered with ``arena_register_servers``):
    arena's own policy server, on the CPU, quick to start and shareable between runs and envs.

    ``options``: the model's ``-o KEY=VALUE`` options (templated like the command); ``venv``: the
    declared venv whose interpreter runs it (:attr:`ServerTask.venv`; the model factory's
    ``default_venv``)."""
    argv = ["serve", model, "--host", "{host}", "--port", "{port}"]
    for key, value in (options or {}).items():
        argv += ["-o", f"{key}={value}"]
    return ServerTask(
        name=model,
        command=["arena", *argv],
        local_command=["{python}", "-m", "arena", *argv],
        venv=venv,
        port=8000,
        readiness="websocket",
        startup_timeout_s=startup_timeout_s,
        resources=ServerResources(cpu=1, gpu=0, memory=1.0),
        shareable=True,
        api_key_args=["--api-key-env", "{api_key_env}"],
    )


class ServerOverrides(BaseModel):
    """A run's ``server:`` key: overrides of the derived ServerTask, or ``external: true``."""

    model_config = ConfigDict(extra="forbid")

    external: bool = Field(
        False, description="use a server already running at the policy's remote_host:remote_port"
    )
    image: str | None = None
    command: list[str] | None = None
    local_command: list[str] | None = None
    venv: str | None = None
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
    api_key_args: list[str] | None = None
    bind: str | None = None
    gpus: list[str] | None = Field(
        None, description="local backend: pin the server to these GPUs (CUDA_VISIBLE_DEVICES entries)"
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _gpu_names(cls, value: object) -> object:
        if isinstance(value, list):
            return [str(v) for v in value]
        return value

    def apply(self, task: ServerTask) -> ServerTask:
        """Return ``task`` with every override that is set.

        ``api_key_args`` and ``bind`` describe a command's options, so a run that replaces
        ``command`` or ``local_command`` drops them unless it gives them again.
        """
        data = task.model_dump()
        given = self.model_dump(exclude={"external"}, exclude_none=True)
        if "command" in given or "local_command" in given:
            data["api_key_args"] = None
            data["bind"] = None
        for key, value in given.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return ServerTask.model_validate(data)


Readiness = Literal["websocket", "tcp", "zmq-ping"]
