"""The node supervisor: one run (or one shard of it) on one node, with its policy server.

A Slurm job and an OSMO task run one command, ``arena node SPEC [--shard K/N] [--resume]``;
the backend renders ``SPEC`` (a :class:`NodeSpec`, JSON) next to its job script. The supervisor

1. writes ``starting_server`` and starts the run's policy server
   (:class:`arena.launch.server_process.LocalServer`, the lifecycle the local backend drives
   too): a free port, the readiness probe, the check that the socket listening on the port is
   the server it started (an impostor moves it to another port before it was first ready),
   restarts of a server that exits while the runner works (``server.restarts``); or, with a
   server another task started (OSMO), only waits for its readiness (``server.attach``);
2. runs the runner, ``arena run-one`` (behind the backend's launcher, e.g. ``srun`` with its
   container flags), telling it where the server is (:data:`SERVER_HOST_ENV`,
   :data:`SERVER_PORT_ENV`, :data:`SERVER_INFO_ENV`);
3. stops the runner with the reason when the server is gone for good (the reason in
   ``stop_reason`` and SIGUSR1: run-one ends ``failed`` with it);
4. stops the server once the runner has ended, and writes the final state when the runner
   could not (:func:`arena.outputs.runstate.finish_after_runner`), with why: the server's failure,
   the time limit, a cancellation, or the runner's exit code.

Signals: SIGTERM / SIGINT (``scancel``, OSMO's cancel, Ctrl-C) mark the run cancelled and are
passed to the runner (unless the scheduler signals it itself: ``forward_term``), which records
``cancelled`` itself; SIGUSR1 (a scheduler's "time limit
near", e.g. ``sbatch --signal=B:USR1@N``) is passed to the runner, which ends ``failed`` naming
the limit (:data:`TIME_LIMIT_ENV`). Either one while the server starts ends the start.

Exit code: the runner's (a runner killed by signal N: 128 + N); 3 when the run failed before
the runner could start.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.launch.server_process import LocalServer
from arena.outputs.layout import EXPERIMENT_FILE, RUNNER_LOG, SERVER_LOG, STOP_REASON_FILE, work_dir
from arena.outputs.runstate import finish_after_runner, update_status
from arena.processes import signal_group, spawn
from arena.rollout.invocation import (
    SERVER_HOST_ENV,
    SERVER_INFO_ENV,
    SERVER_PORT_ENV,
    SERVER_TASK_ENV,
    TIME_LIMIT_ENV,
    RunOneInvocation,
    server_task_identity,
)
from arena.servertask import ServerTask

__all__ = ["NodeServer", "NodeSpec", "NodeSupervisor", "main"]

#: Exit code of a run that failed before its runner started (as run-one's "the run failed").
EXIT_FAILED = 3


class NodeServer(BaseModel):
    """The policy server of a node's run: one to start, or one to wait for (``attach``)."""

    model_config = ConfigDict(extra="forbid")

    task: ServerTask = Field(description="the run's ServerTask (name, readiness, startup_timeout_s, env)")
    command: str | None = Field(
        None,
        description="the shell command that starts the server (bash -c; $PORT holds the port chosen): the task's "
        "command with the backend's launcher, e.g. an srun step; null: attach to a server started elsewhere",
    )
    bind: str = Field("127.0.0.1", description="address the server binds (where a free port is chosen)")
    client_host: str = Field("127.0.0.1", description="host the probe and the runner connect to (may be $VAR)")
    port: int = Field(0, ge=0, le=65535, description="0: a free port; attach: the server's port")
    api_key_env: str | None = Field(None, description="NAME of the variable holding the key clients present")
    restarts: int = Field(0, ge=0, description="times a server that exits while the runner works is restarted")
    restarts_option: str = Field("server_restarts", description="the option `restarts` came from (named in errors)")
    stop_grace_s: float = Field(10.0, ge=0, description="seconds between SIGTERM and SIGKILL when stopping it")
    signal_command: str | None = Field(
        None, description="shell command signalling the server ({signal}: TERM or KILL) where its launcher would not"
    )
    instance_env: str | None = Field(
        None, description="NAME set to a value unique to each start in the server's environment (the port check)"
    )
    info: dict[str, Any] = Field(default_factory=dict, description="more of run_result.json's `server` (image, exposure)")


class NodeSpec(BaseModel):
    """What ``arena node`` runs: rendered by a backend, read from a JSON file."""

    model_config = ConfigDict(extra="forbid")

    output_dir: str = Field(description="the experiment's output directory (may be $VAR)")
    run: str
    snapshot: str | None = Field(
        None, description="the experiment snapshot run-one reads (a relative path: beside the spec); null: OUTPUT_DIR's"
    )
    arena: list[str] = Field(default_factory=lambda: ["arena"], description="the command that runs arena")
    launcher: str | None = Field(
        None, description="shell words put before the runner's command (e.g. `srun --overlap ...`); null: none"
    )
    server: NodeServer | None = None
    server_api_key_env: str | None = Field(None, description="run-one's --server-api-key-env (a generated key)")
    time_limit: str | None = Field(None, description="the limit SIGUSR1 announces, for the run's error")
    status_env: dict[str, str] = Field(
        default_factory=dict, description="status.json fields taken from environment variables (field: NAME)"
    )
    forward_term: bool = Field(
        True,
        description="pass SIGTERM/SIGINT on to the runner; false where the scheduler signals every step itself "
        "(Slurm's scancel: srun would answer a second SIGTERM by SIGKILLing run-one before it records why)",
    )
    poll_s: float = Field(0.5, gt=0, description="seconds between checks of the server and the runner")
    queue: bool = Field(
        False,
        description="the runner claims the run's episodes from OUTPUT_DIR/queue.sqlite (`arena run-one --queue`), "
        "sharing them with the runners of other nodes; --shard K/N then only names its work directory",
    )


def _expand(text: str) -> str:
    """``$VAR`` / ``${VAR}`` of the job's environment (a scheduler's node name, job id)."""
    return os.path.expandvars(text)


class NodeSupervisor:
    """Runs :class:`NodeSpec` for one work directory (the run's, or shard ``K`` of ``N``'s)."""

    def __init__(self, spec: NodeSpec, shard: tuple[int, int] | None = None, resume: bool = False,
                 keep_errors: bool = False) -> None:
        self.spec = spec
        self.shard = shard
        self.resume = resume
        self.keep_errors = keep_errors
        self.output_dir = Path(_expand(spec.output_dir))
        self.work_dir = work_dir(self.output_dir, spec.run, shard[0] if shard else None)
        self.cancelled = False
        self.time_limit = False
        self.fail_reason: str | None = None
        self.server: LocalServer | None = None
        self.runner = None
        self.fields: dict[str, Any] = {
            "run": spec.run, "shard": list(shard) if shard else None, "node": socket.gethostname(),
            **{field: os.environ.get(name) for field, name in spec.status_env.items()},
        }

    # -- what it says ----------------------------------------------------------------------
    @staticmethod
    def say(text: str) -> None:
        print(f"arena: {text}", flush=True)

    def _status(self, state: str, **fields: Any) -> None:
        update_status(self.work_dir, state, **self.fields, **fields)

    def _server_info(self) -> dict[str, Any] | None:
        server = self.spec.server
        if server is None:
            return None
        port = self.server.port if self.server is not None else server.port
        extra = {k: v for k, v in self.fields.items() if k not in ("run", "shard", "node") and v is not None}
        return {"task": server.task.name, "host": _expand(server.client_host), "port": port, "log": SERVER_LOG,
                **server.info, **extra}

    # -- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGUSR1:
            self.time_limit = True
            self.say(f"the time limit ({self.spec.time_limit or 'the scheduler'}) is near: stopping the run")
        else:
            self.cancelled = True
        if self.runner is not None and self.runner.poll() is None:
            if signum == signal.SIGUSR1:
                signal_group(self.runner, signal.SIGUSR1)
            elif self.spec.forward_term:
                signal_group(self.runner, signal.SIGTERM)

    @property
    def stopping(self) -> bool:
        return self.cancelled or self.time_limit

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> int:
        """Supervise the run to its end; return the exit code (see the module)."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, self._on_signal)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.stopping:  # a signal the job script noted before arena started
                return self._end(EXIT_FAILED, "before the runner started")
            if self.spec.server is not None:
                error = self._serve(self.spec.server)
                if error is not None:  # a stop while it started is the stop's, not the server's
                    return self._end(EXIT_FAILED, error, server_failed=not self.stopping)
            if self.stopping:
                return self._end(EXIT_FAILED, "before the runner started")
            self.runner = spawn(self._runner_argv(), self.work_dir / RUNNER_LOG, self._runner_env())
            if self.time_limit:  # the notice came while the runner was starting
                signal_group(self.runner, signal.SIGUSR1)
            while self.runner.poll() is None:
                self._watch_server()
                time.sleep(self.spec.poll_s)
            code = self.runner.returncode
            code = 128 - code if code < 0 else code
            return self._end(code, f"the runner exited with code {code} without finishing (see {RUNNER_LOG})")
        finally:
            if self.server is not None:
                self.server.stop("the runner has ended")

    def _serve(self, server: NodeServer) -> str | None:
        """Start (or wait for) the server until it is ready; the error when it never is."""
        host = _expand(server.client_host)
        key = os.environ.get(server.api_key_env) if server.api_key_env else None
        if server.command is None:  # started by another task: wait for it
            from arena.errors import ArenaError
            from arena.transport.probe import wait_until_ready

            self._status("starting_server", server=self._server_info())
            timeout = server.task.startup_timeout_s
            try:
                wait_until_ready(server.task.readiness, host, server.port, timeout, api_key=key)
            except ArenaError as exc:
                return (f"policy server '{server.task.name}' was not ready ({server.task.readiness} on {host}:{server.port}) "
                        f"within startup_timeout_s={timeout:g} s: {exc} (see its {SERVER_LOG})")
            return None
        self.server = LocalServer(
            server.task, server.bind, server.port, self.work_dir / SERVER_LOG,
            max_restarts=server.restarts, probe_key=key, command=["bash", "-c", server.command],
            probe_host=host, restarts_option=server.restarts_option, stop_grace_s=server.stop_grace_s,
            signal_command=server.signal_command, instance_env=server.instance_env,
        )
        (self.work_dir / SERVER_LOG).write_text("")
        self.server.start()
        self.say(f"starting policy server {server.task.name} on {host}:{self.server.port}")
        self._status("starting_server", server=self._server_info())
        port = self.server.port
        while self.server.poll() == "starting":
            if self.stopping:
                return "while the policy server was starting"
            if self.server.port != port:  # moved away from an impostor
                port = self.server.port
                self.say(f"starting policy server {server.task.name} again on port {port}")
                self._status("starting_server", server=self._server_info())
            time.sleep(0.2)
        if self.server.state != "ready":
            return self.server.error or f"policy server '{server.task.name}' did not start"
        self.say(f"policy server {server.task.name} is ready on {host}:{port}")
        return None

    def _watch_server(self) -> None:
        """While the runner works: restarts (``LocalServer.poll``); a server gone for good
        stops the runner with why."""
        if self.server is None or self.fail_reason is not None or self.stopping:
            return
        if self.server.poll() == "failed":
            self._stop_runner(self.server.error or f"policy server '{self.server.task.name}' failed")

    def _stop_runner(self, reason: str) -> None:
        self.fail_reason = reason
        self.say(f"stopping the run: {reason}")
        (self.work_dir / STOP_REASON_FILE).write_text(reason + "\n")
        if self.runner is not None:
            signal_group(self.runner, signal.SIGUSR1)

    def _runner_argv(self) -> list[str]:
        spec = self.spec
        invocation = RunOneInvocation(
            _expand(spec.snapshot) if spec.snapshot else self.output_dir / EXPERIMENT_FILE, spec.run, self.output_dir,
            shard=self.shard, queue=spec.queue, resume=self.resume, keep_errors=self.keep_errors,
            server_api_key_env=spec.server_api_key_env,
        )
        argv = [*spec.arena, *invocation.args()]
        if spec.launcher:
            return ["bash", "-c", f'{spec.launcher} "$@"', "arena-runner", *argv]
        return argv

    def _runner_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.spec.time_limit is not None:
            env[TIME_LIMIT_ENV] = self.spec.time_limit
        info = self._server_info()
        if info is not None and self.spec.server is not None:
            env[SERVER_TASK_ENV] = json.dumps(server_task_identity(self.spec.server.task))
            env[SERVER_HOST_ENV] = str(info["host"])
            env[SERVER_PORT_ENV] = str(info["port"])
            env[SERVER_INFO_ENV] = json.dumps(info)
        return env

    def _end(self, code: int, message: str, server_failed: bool = False) -> int:
        """Stop the server; write the final state the runner did not; return ``code``."""
        if self.server is not None:
            self.server.stop("the runner has ended" if self.runner is not None else "the run ended")
        if self.fail_reason is not None:
            state, error = "failed", self.fail_reason
        elif server_failed:
            state, error = "failed", message
        elif self.time_limit:
            limit = self.spec.time_limit or "the scheduler's time limit"
            state, error = "failed", (f"stopped at the time limit ({limit}): {message}; "
                                      f"`arena run --resume {self.output_dir}` runs the rest (or raise the limit)")
        elif self.cancelled:
            state, error = "cancelled", "cancelled before the run finished"
        else:
            state, error = "failed", message
        written = finish_after_runner(
            self.output_dir, self.spec.run, state=state, error=error, shard=self.shard, server=self._server_info(),
            runner_started=self.runner is not None, **{k: v for k, v in self.fields.items() if k not in ("run", "shard")},
        )
        if written == "completed":
            self.say(f"run {self.spec.run}: completed (every work item was recorded)")
        elif written is not None:
            self.say(f"run {self.spec.run}: {state}: {error}")
        return code


def main(spec_path: str, shard: str | None = None, resume: bool = False, keep_errors: bool = False,
         signalled: Sequence[str] = ()) -> int:
    """``arena node``: read ``spec_path`` (``$VAR``s expanded) and supervise the run.
    ``signalled``: ``TERM`` / ``USR1`` the job script received before arena started (acted on
    as if they came now).

    Raises:
        ValueError: the spec cannot be read, ``shard`` is not ``K/N`` or a signal is unknown.
    """
    unknown = sorted(set(signalled) - {"TERM", "USR1"})
    if unknown:
        raise ValueError(f"--signalled {', '.join(unknown)}: expected TERM or USR1")
    from arena.rollout.workitems import parse_shard

    path = Path(_expand(spec_path))
    try:
        spec = NodeSpec.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"node spec {path}: {exc}") from exc
    if spec.snapshot is not None and not Path(_expand(spec.snapshot)).is_absolute():  # beside the spec
        spec = spec.model_copy(update={"snapshot": str(path.parent / _expand(spec.snapshot))})
    shard_t = parse_shard(shard) if shard else None
    if shard_t is not None and shard_t[1] == 1:
        shard_t = None
    supervisor = NodeSupervisor(spec, shard_t, resume, keep_errors)
    supervisor.cancelled = "TERM" in signalled
    if "USR1" in signalled:
        supervisor.time_limit = True
        supervisor.say(f"the time limit ({spec.time_limit or 'the scheduler'}) is near: stopping the run")
    return supervisor.run()


def shell_command(arena: list[str], spec_path: str, shard: str | None = None) -> str:
    """The job script's one line: ``exec ARENA node SPEC [--shard K/N] "$@"`` (``spec_path`` and
    ``shard`` as shell words, e.g. ``"$SLURM_ARRAY_TASK_ID/4"``)."""
    words = [*(shlex.quote(w) for w in arena), "node", spec_path]
    if shard:
        words += ["--shard", shard]
    return "exec " + " ".join(words) + ' "$@"'


if __name__ == "__main__":  # pragma: no cover - `arena node` is the entry point
    sys.exit(main(*sys.argv[1:2]))
