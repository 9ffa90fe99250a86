"""One ``arena run-one`` invocation: its arguments and its environment, as one value.

Every backend executes a run through ``arena run-one`` and renders the same
:class:`RunOneInvocation` in its own syntax: the local backend and the watchdog as a
subprocess ``argv`` (:meth:`RunOneInvocation.argv`) with :meth:`RunOneInvocation.environment`,
OSMO as a line of its task's bash script and the task's ``environment`` map, Slurm as the
run-one line of its batch script, whose shard and server arguments are bash arrays filled in
when the job runs (:meth:`RunOneInvocation.shard_args`, :meth:`RunOneInvocation.server_args`).
A value the runner's shell expands (``"$OUT"``, ``"$PORT"``) is a :class:`ShellWord`, written as
it is; any other value is quoted.

The flags are ``arena run-one``'s (``arena run-one --help``), and the environment variables'
names are owned here: a backend never spells one itself.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Set in the environment of the rollout process a watchdog supervises (it must not supervise).
WATCHDOG_CHILD_ENV = "ARENA_WATCHDOG_CHILD"
#: Where the policy server is, when no ``--server-host`` / ``--server-port`` says it.
SERVER_HOST_ENV = "ARENA_SERVER_HOST"
SERVER_PORT_ENV = "ARENA_SERVER_PORT"
#: NAME of the variable holding the key of the server a backend started (a generated one);
#: the same as ``--server-api-key-env``.
SERVER_API_KEY_ENV_ENV = "ARENA_SERVER_API_KEY_ENV"
#: JSON describing the server a backend started for this run (task name, host, port, log):
#: ``run_result.json``'s ``server``.
SERVER_INFO_ENV = "ARENA_SERVER_INFO"
#: JSON of the ServerTask a backend started for this run (:func:`server_task_identity`), so
#: run-one records the model that answered without planning the servers again.
SERVER_TASK_ENV = "ARENA_SERVER_TASK"
#: Describes the time limit whose approach SIGUSR1 announces (e.g. ``launch.slurm.time=02:00:00``).
TIME_LIMIT_ENV = "ARENA_TIME_LIMIT"


class ShellWord(str):
    """An argument written into a shell script as it is, for the shell to expand (``"$OUT"``)."""


def resume_args(keep_errors: bool = False) -> list[str]:
    """The flags of a resumed run-one: ``--resume`` (and ``--keep-errors``: error episodes
    count as finished)."""
    return ["--resume", *(["--keep-errors"] if keep_errors else [])]


def server_task_identity(task: Any) -> dict[str, Any]:
    """What run-one needs to know of the ServerTask a backend started: ``name``,
    ``checkpoint`` and ``revision`` (:meth:`arena.servertask.ServerTask.model_identity`) and
    ``image`` (what the task would run in; the backend's :data:`SERVER_INFO_ENV` says what ran)."""
    return {"name": task.name, **task.model_identity(), "image": task.image}


@dataclass(frozen=True)
class RunOneInvocation:
    """``arena run-one SNAPSHOT --run RUN --output-dir OUTPUT_DIR [flags]`` and its environment.

    Arguments: ``shard`` ``(K, N)`` (or the text ``K/N``: a :class:`ShellWord` in a job
    array), ``queue`` (claim episodes from the work queue; with ``shard``, K only names the work
    directory), ``resume`` / ``keep_errors`` (:func:`resume_args`), ``server_host`` /
    ``server_port`` / ``server_api_key_env`` (where the server a backend started listens, and
    the NAME of the variable holding its key), ``allow_imports`` (modules ``package.module:Class``
    types may import). Environment: ``server_info`` (:data:`SERVER_INFO_ENV`), ``server_task``
    (:data:`SERVER_TASK_ENV`, :func:`server_task_identity`), ``time_limit``
    (:data:`TIME_LIMIT_ENV`), ``watchdog_child`` (:data:`WATCHDOG_CHILD_ENV`) and ``env``,
    further variables (a generated key, which never enters a file or an argument).
    """

    snapshot: str | os.PathLike[str]
    run: str
    output_dir: str | os.PathLike[str]
    shard: tuple[int, int] | str | None = None
    queue: bool = False
    resume: bool = False
    keep_errors: bool = False
    server_host: str | None = None
    server_port: int | str | None = None
    server_api_key_env: str | None = None
    allow_imports: tuple[str, ...] = ()
    server_info: Mapping[str, Any] | None = None
    server_task: Mapping[str, Any] | None = None
    time_limit: str | None = None
    watchdog_child: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    # -- arguments --------------------------------------------------------------------------
    def base_args(self) -> list[str]:
        """``run-one SNAPSHOT --run RUN --output-dir OUTPUT_DIR``."""
        return ["run-one", _word(self.snapshot), "--run", _word(self.run), "--output-dir", _word(self.output_dir)]

    def shard_args(self) -> list[str]:
        """``--shard K/N``, or nothing."""
        if self.shard is None:
            return []
        value = self.shard if isinstance(self.shard, str) else f"{self.shard[0]}/{self.shard[1]}"
        return ["--shard", value]

    def queue_args(self) -> list[str]:
        """``--queue`` (episodes claimed from the output directory's work queue), or nothing."""
        return ["--queue"] if self.queue else []

    def resume_args(self) -> list[str]:
        """``--resume [--keep-errors]`` when resuming, else nothing (``--keep-errors`` alone
        is kept: a supervised child resumes with the parent's choice)."""
        if self.resume:
            return resume_args(self.keep_errors)
        return ["--keep-errors"] if self.keep_errors else []

    def server_args(self) -> list[str]:
        """``--server-host H --server-port P --server-api-key-env NAME``, those known."""
        args: list[str] = []
        if self.server_host is not None:
            args += ["--server-host", _word(self.server_host)]
        if self.server_port is not None:
            args += ["--server-port", _word(self.server_port)]
        if self.server_api_key_env is not None:
            args += ["--server-api-key-env", self.server_api_key_env]
        return args

    def import_args(self) -> list[str]:
        """``--allow-import MODULE`` for each of ``allow_imports``."""
        return [word for module in self.allow_imports for word in ("--allow-import", module)]

    def args(self) -> list[str]:
        """Every argument after ``arena``, in this order: base, shard, queue, resume, server, imports."""
        return [*self.base_args(), *self.shard_args(), *self.queue_args(), *self.resume_args(), *self.server_args(),
                *self.import_args()]

    def argv(self, python: str = sys.executable) -> list[str]:
        """A subprocess command line: ``[python, "-m", "arena", *args()]``."""
        return [python, "-m", "arena", *self.args()]

    def shell(self, program: str = "arena", args: list[str] | None = None) -> str:
        """``args`` (default :meth:`args`) as one shell command line after ``program``: each
        word quoted, except a :class:`ShellWord`, written as it is."""
        words = self.args() if args is None else args
        return " ".join([program, *(w if isinstance(w, ShellWord) else shlex.quote(w) for w in words)]).strip()

    # -- environment ------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """The variables the runner is started with (besides those it inherits)."""
        out: dict[str, str] = {}
        if self.server_info is not None:
            out[SERVER_INFO_ENV] = json.dumps(dict(self.server_info))
        if self.server_task is not None:
            out[SERVER_TASK_ENV] = json.dumps(dict(self.server_task))
        if self.time_limit is not None:
            out[TIME_LIMIT_ENV] = self.time_limit
        if self.watchdog_child:
            out[WATCHDOG_CHILD_ENV] = "1"
        out.update(self.env)
        return out


def _word(value: Any) -> str:
    return value if isinstance(value, ShellWord) else str(value)
