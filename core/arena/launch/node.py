"""The node supervisor: the runs (or one shard of each) that share a policy server, on one node.

A Slurm job, an OSMO task and a Ray task run one command, ``arena node SPEC [--shard K/N] [--resume]``;
the backend renders ``SPEC`` (a :class:`NodeSpec`, JSON) next to its job script. A spec names
one run (``run``) or several that use the same server (``run`` and ``shared_with``: runs whose
server tasks are the same, :func:`arena.launch.planning.share_key`); the server is started once
and the runners of those runs run beside it, ``runners`` at a time, in the spec's order, each
run's states and records in its own work directory. The supervisor

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
4. stops the server once every runner has ended (its log is copied into each run's work
   directory), and writes each run's final state when its runner could not
   (:func:`arena.outputs.runstate.finish_after_runner`), with why: the server's failure, the
   time limit, a cancellation, or the runner's exit code.

Signals: SIGTERM / SIGINT (``scancel``, OSMO's cancel, Ctrl-C) mark the run cancelled and are
passed to the runner (unless the scheduler signals it itself: ``forward_term``), which records
``cancelled`` itself; SIGUSR1 (a scheduler's "time limit
near", e.g. ``sbatch --signal=B:USR1@N``) is passed to the runner, which ends ``failed`` naming
the limit (:data:`TIME_LIMIT_ENV`). Either one while the server starts ends the start.

Exit code: the runner's (a runner killed by signal N: 128 + N); 3 when the run failed before
the runner could start; with several runs, the first run's that is not 0.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

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
    shared_with: list[str] = Field(
        default_factory=list,
        description="more runs whose runners use the same server (runs of one server task, "
        "arena.launch.planning.share_key), run after `run` in this order; empty: `run` alone (left out of the JSON)",
    )
    runners: int = Field(1, ge=1, description="runners of those runs at the same time (at most one per run)")
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

    @model_serializer(mode="wrap")
    def _one_run_as_before(self, handler: Any) -> dict[str, Any]:
        """A one-run spec's JSON is the same as before ``shared_with`` / ``runners`` existed."""
        data = handler(self)
        if not data.get("shared_with"):
            data.pop("shared_with", None)
            if data.get("runners") == 1:
                data.pop("runners", None)
        return data

    @property
    def runs(self) -> list[str]:
        """Every run of the spec, ``run`` first."""
        return [self.run, *(r for r in self.shared_with if r != self.run)]


def _expand(text: str) -> str:
    """``$VAR`` / ``${VAR}`` of the job's environment (a scheduler's node name, job id)."""
    return os.path.expandvars(text)


class _Runner:
    """One run of the spec on this node: its work directory and, once started, its runner."""

    def __init__(self, run: str, work: Path) -> None:
        self.run = run
        self.work_dir = work
        self.proc: Any = None
        self.code: int | None = None  # the exit code once it ended (or the run ended without it)


class NodeSupervisor:
    """Runs :class:`NodeSpec` for its runs' work directories (each run's, or shard ``K`` of ``N``'s)."""

    def __init__(self, spec: NodeSpec, shard: tuple[int, int] | None = None, resume: bool = False,
                 keep_errors: bool = False) -> None:
        self.spec = spec
        self.shard = shard
        self.resume = resume
        self.keep_errors = keep_errors
        self.output_dir = Path(_expand(spec.output_dir))
        self.runs = [_Runner(run, work_dir(self.output_dir, run, shard[0] if shard else None)) for run in spec.runs]
        self.work_dir = self.runs[0].work_dir  # the server's log is written here (copied to the others' at the end)
        self.cancelled = False
        self.time_limit = False
        self.fail_reason: str | None = None
        self.server: LocalServer | None = None
        self.server_stopped = False
        self.fields: dict[str, Any] = {
            "shard": list(shard) if shard else None, "node": socket.gethostname(),
            **{field: os.environ.get(name) for field, name in spec.status_env.items()},
        }

    # -- what it says ----------------------------------------------------------------------
    @staticmethod
    def say(text: str) -> None:
        print(f"arena: {text}", flush=True)

    def _status(self, runner: _Runner, state: str, **fields: Any) -> None:
        update_status(runner.work_dir, state, run=runner.run, **self.fields, **fields)

    def _server_info(self) -> dict[str, Any] | None:
        server = self.spec.server
        if server is None:
            return None
        port = self.server.port if self.server is not None else server.port
        extra = {k: v for k, v in self.fields.items() if k not in ("shard", "node") and v is not None}
        info = {"task": server.task.name, "host": _expand(server.client_host), "port": port, "log": SERVER_LOG,
                **server.info, **extra}
        if len(self.runs) > 1:
            info["shared_by"] = [r.run for r in self.runs]
        return info

    def _live(self) -> list[_Runner]:
        return [r for r in self.runs if r.proc is not None and r.code is None]

    # -- signals ---------------------------------------------------------------------------
    def _on_signal(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGUSR1:
            self.time_limit = True
            self.say(f"the time limit ({self.spec.time_limit or 'the scheduler'}) is near: stopping the run")
        else:
            self.cancelled = True
        for runner in self._live():
            if runner.proc.poll() is not None:
                continue
            if signum == signal.SIGUSR1:
                signal_group(runner.proc, signal.SIGUSR1)
            elif self.spec.forward_term:
                signal_group(runner.proc, signal.SIGTERM)

    @property
    def stopping(self) -> bool:
        return self.cancelled or self.time_limit

    # -- the runs --------------------------------------------------------------------------
    def run(self) -> int:
        """Supervise the runs to their end; return the exit code (see the module)."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, self._on_signal)
        for runner in self.runs:
            runner.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.stopping:  # a signal the job script noted before arena started
                return self._end_unstarted("before the runner started")
            if self.spec.server is not None:
                error = self._serve(self.spec.server)
                if error is not None:  # a stop while it started is the stop's, not the server's
                    return self._end_unstarted(error, server_failed=not self.stopping)
            pending = list(self.runs)
            while pending or self._live():
                while pending and len(self._live()) < self.spec.runners and not self.stopping and self.fail_reason is None:
                    self._start_runner(pending.pop(0))
                for runner in self._live():
                    if runner.proc.poll() is not None:
                        code = runner.proc.returncode
                        code = 128 - code if code < 0 else code
                        halted = self.stopping or self.fail_reason is not None
                        if len(self._live()) == 1 and (not pending or halted):  # the last runner: server first
                            self._stop_server()
                        self._end(runner, code, f"the runner exited with code {code} without finishing (see {RUNNER_LOG})")
                if (self.stopping or self.fail_reason is not None) and pending and not self._live():
                    break  # the runs not started yet end below, with why
                self._watch_server()
                if pending or self._live():
                    time.sleep(self.spec.poll_s)
            self._stop_server()
            for runner in pending:
                self._end(runner, EXIT_FAILED, "before the runner started")
            return next((r.code for r in self.runs if r.code), 0) or 0
        finally:
            self._stop_server()

    def _start_runner(self, runner: _Runner) -> None:
        runner.proc = spawn(self._runner_argv(runner.run), runner.work_dir / RUNNER_LOG, self._runner_env())
        if len(self.runs) > 1:
            self.say(f"run {runner.run}: runner started (pid {runner.proc.pid})")
        if self.time_limit:  # the notice came while the runner was starting
            signal_group(runner.proc, signal.SIGUSR1)

    def _serve(self, server: NodeServer) -> str | None:
        """Start (or wait for) the server until it is ready; the error when it never is."""
        host = _expand(server.client_host)
        key = os.environ.get(server.api_key_env) if server.api_key_env else None
        if server.command is None:  # started by another task: wait for it
            from arena.errors import ArenaError
            from arena.transport.probe import wait_until_ready

            for runner in self.runs:
                self._status(runner, "starting_server", server=self._server_info())
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
        users = f" for runs {', '.join(r.run for r in self.runs)}" if len(self.runs) > 1 else ""
        self.say(f"starting policy server {server.task.name} on {host}:{self.server.port}{users}")
        for runner in self.runs:
            self._status(runner, "starting_server", server=self._server_info())
        port = self.server.port
        while self.server.poll() == "starting":
            if self.stopping:
                return "while the policy server was starting"
            if self.server.port != port:  # moved away from an impostor
                port = self.server.port
                self.say(f"starting policy server {server.task.name} again on port {port}")
                for runner in self.runs:
                    self._status(runner, "starting_server", server=self._server_info())
            time.sleep(0.2)
        if self.server.state != "ready":
            return self.server.error or f"policy server '{server.task.name}' did not start"
        self.say(f"policy server {server.task.name} is ready on {host}:{port}")
        return None

    def _watch_server(self) -> None:
        """While runners work: restarts (``LocalServer.poll``); a server gone for good stops
        the runners with why (the runs not started yet end with it too)."""
        if self.server is None or self.server_stopped or self.fail_reason is not None or self.stopping:
            return
        if self.server.poll() == "failed":
            self._stop_runners(self.server.error or f"policy server '{self.server.task.name}' failed")

    def _stop_runners(self, reason: str) -> None:
        self.fail_reason = reason
        self.say(f"stopping the run{'s' if len(self.runs) > 1 else ''}: {reason}")
        for runner in self.runs:
            if runner.code is None:
                (runner.work_dir / STOP_REASON_FILE).write_text(reason + "\n")
        for runner in self._live():
            signal_group(runner.proc, signal.SIGUSR1)

    def _stop_server(self) -> None:
        """Stop the server (once); its log into every other run's work directory."""
        if self.server is None or self.server_stopped:
            return
        self.server_stopped = True
        started = any(r.proc is not None for r in self.runs)
        self.server.stop("the runner has ended" if started else "the run ended")
        for runner in self.runs[1:]:
            try:
                shutil.copyfile(self.work_dir / SERVER_LOG, runner.work_dir / SERVER_LOG)
            except OSError as exc:  # a full disk must not hide how the runs ended
                self.say(f"cannot copy the server log to {runner.work_dir}: {exc.strerror or exc}")

    def _runner_argv(self, run: str) -> list[str]:
        spec = self.spec
        invocation = RunOneInvocation(
            _expand(spec.snapshot) if spec.snapshot else self.output_dir / EXPERIMENT_FILE, run, self.output_dir,
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

    def _end_unstarted(self, message: str, server_failed: bool = False) -> int:
        """Every run ends before its runner started (a stop, the server never ready): ``EXIT_FAILED``."""
        self._stop_server()
        for runner in self.runs:
            self._end(runner, EXIT_FAILED, message, server_failed=server_failed)
        return EXIT_FAILED

    def _end(self, runner: _Runner, code: int, message: str, server_failed: bool = False) -> int:
        """Write the final state of ``runner``'s run that its runner did not; return ``code``."""
        runner.code = code
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
        info = self._server_info()
        written = finish_after_runner(
            self.output_dir, runner.run, state=state, error=error, shard=self.shard, server=info,
            runner_started=runner.proc is not None, **{k: v for k, v in self.fields.items() if k != "shard"},
        )
        if written == "completed":
            self.say(f"run {runner.run}: completed (every work item was recorded)")
        elif written is not None:
            self.say(f"run {runner.run}: {state}: {error}")
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
