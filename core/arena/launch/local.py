"""The ``local`` launch backend: every run as an ``arena run-one`` subprocess on this machine.

``launch.local.jobs`` runs execute at a time. For each remote run the backend starts the
ServerTask's ``local_command`` on a free port, waits for its readiness check, points the run
at it and stops it once no run needs it any more — also on Ctrl-C, on errors and when a
runner dies. Runs whose ServerTasks are identical and ``shareable`` use one instance.

Servers bind ``launch.local.host`` (loopback by default: server and simulation share this
machine). Binding another address exposes the server, and then arena's own server requires
an API key generated for the run, handed to the server and the runner as
``$ARENA_SERVER_API_KEY`` and never written to a file (:mod:`arena.launch.exposure`).
Each server gets the GPUs it asks for as ``CUDA_VISIBLE_DEVICES`` (:mod:`arena.launch.gpus`);
one whose GPUs are held by another server waits for them.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field
from rich.markup import escape

from arena.errors import ConfigError
from arena.launch.base import BackendOptions, LaunchBackend, Resume, Submission
from arena.launch.exposure import GENERATED_KEY_ENV, Exposure, decide_exposure, generate_key
from arena.launch.gpus import GpuPool, cuda_device_order, discover_gpus
from arena.launch.planning import share_key
from arena.launch.server_process import LocalServer
from arena.outputs.layout import EXPERIMENT_FILE, RUNNER_LOG, SERVER_LOG, SERVERS_DIR, run_dir
from arena.outputs.records import LIVE_STATES, read_run_statuses
from arena.outputs.runstate import finish_after_runner, update_status
from arena.processes import signal_group, spawn, terminate
from arena.rollout.invocation import RunOneInvocation, server_task_identity

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan


class LocalOptions(BackendOptions):
    jobs: int = Field(1, ge=1, description="runs executed at the same time")
    host: str = Field(
        "127.0.0.1",
        description="address policy servers bind to; a non-loopback one exposes them (arena's own server then "
        "requires a per-run API key)",
    )
    poll_interval_s: float = Field(0.1, gt=0, description="seconds between scheduler ticks")
    server_restarts: int = Field(
        2, ge=0, description="times a policy server that exits while runs still need it is restarted (same port)"
    )
    work: Literal["queue", "static"] = Field(
        "queue",
        description="queue: runners claim episodes from OUTPUT_DIR/queue.sqlite with a lease (arena.outputs.workqueue); "
        "static: each runner runs its run's work items in order",
    )


@dataclass
class _Instance:
    """A server instance, the runs that still need it, and who can reach it."""

    key: str
    server: LocalServer | None
    exposure: Exposure | None = None
    users: set[str] = field(default_factory=set)
    all_users: list[str] = field(default_factory=list)
    waiting_note: str | None = None  # said once while it waits for GPUs


@dataclass
class _RunSlot:
    name: str
    instance: _Instance | None
    proc: subprocess.Popen | None = None


class LocalBackend(LaunchBackend):
    """Runs on this machine. ``arena run`` always waits for a local submission."""

    name = "local"
    Config = LocalOptions
    can_resume = True
    always_waits = True
    options: LocalOptions  # set by LaunchBackend.__init__ from Config

    # -- planning ------------------------------------------------------------------------------
    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse what this backend cannot run, before anything starts.

        Raises:
            ConfigError: a ServerTask has only a container image.
        """
        for run, plan in servers.items():
            if plan.task is not None and not plan.task.local_command:
                raise ConfigError(
                    f"server task '{plan.task.name}' has only a container image ({plan.task.image}); "
                    "the local backend cannot run containers: use --backend slurm (pyxis) or --backend osmo, "
                    "or start the server yourself and set `server: {external: true}`",
                    file=experiment.source,
                    run=run,
                    key="server",
                )
            problem = plan.task.missing_venv() if plan.task is not None and not plan.external else None
            if problem is not None:
                raise ConfigError(problem, file=experiment.source, run=run, key="server.venv")

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        """The commands ``submit`` would start, pasteable (``shlex.join``), under comment lines:
        each server's once with its GPUs (who uses it and its exposure are in the summary
        above), then the first run's, the others' being the same but for ``--run``."""
        from arena.launch.wording import command, count, run_names

        self.check(experiment, servers)
        lines = [f"# local backend: {count(self.options.jobs, 'run')} at a time; output {output_dir}"]
        pool = GpuPool(*discover_gpus())
        for inst in self._instances(experiment, servers).values():
            if inst.server is None or inst.exposure is None:
                continue
            task = inst.server.task
            lines.append(f"# server {task.name} (port chosen at start); {_gpu_plan(pool, task, inst.key)}")
            lines.append(command(inst.server.argv(port=0)))
        names = list(experiment.runs)
        if names:
            others = f"; then {run_names(names[1:])}, each the same command with its own --run" if len(names) > 1 else ""
            lines.append(f"# run {names[0]}{others}")
            lines.append(command(self._invocation(output_dir, names[0], queue=self.options.work == "queue").argv()))
        return "\n".join(lines)

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        return {
            run: inst.exposure
            for inst in self._instances(experiment, servers).values()
            if inst.exposure is not None
            for run in inst.all_users
        }

    def _instances(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, _Instance]:
        instances: dict[str, _Instance] = {}
        for run, plan in servers.items():
            if plan.task is None:
                continue
            policy_key_env = getattr(experiment.runs[run].policy, "api_key_env", None)
            exposure = decide_exposure(plan.task, plan.task.local_command or [], self.options.host, policy_key_env)
            key = share_key(run, plan.task, exposure.client_key_env)  # one API key per instance
            inst = instances.get(key)
            if inst is None:
                inst = instances[key] = _Instance(
                    key=key,
                    server=LocalServer(
                        plan.task,
                        self.options.host,
                        0,
                        Path(os.devnull),
                        max_restarts=self.options.server_restarts,
                        restarts_option="launch.local.server_restarts",
                        api_key_env=exposure.server_key_env,
                    ),
                    exposure=exposure,
                )
            inst.users.add(run)
            inst.all_users.append(run)
        return instances

    @staticmethod
    def _invocation(
        output_dir: Path,
        run: str,
        server: LocalServer | None = None,
        exposure: Exposure | None = None,
        key: str | None = None,
        resume: Resume | None = None,
        queue: bool = False,
    ) -> RunOneInvocation:
        """The runner of ``run``: pointed at ``server`` when it has one (``key``: the key
        generated for it, handed over in the environment only)."""
        generated = server is not None and exposure is not None and exposure.key == "generated"
        return RunOneInvocation(
            output_dir / EXPERIMENT_FILE,
            run,
            output_dir,
            queue=queue,
            resume=resume is not None,
            keep_errors=resume is not None and resume.keep_errors,
            server_host=server.host if server is not None else None,
            server_port=server.port if server is not None else None,
            server_api_key_env=GENERATED_KEY_ENV if generated else None,
            server_info=_server_info(server, exposure) if server is not None else None,
            server_task=server_task_identity(server.task) if server is not None else None,
            env={GENERATED_KEY_ENV: key} if generated and key is not None else {},
        )

    # -- submission ----------------------------------------------------------------------------
    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool = True,
        console: Console | None = None,
        resume: Resume | None = None,
    ) -> Submission:
        """``resume``: runners skip work items with a finished record (see :class:`Resume`)."""
        self.check(experiment, servers)
        submission = Submission(
            backend=self.name,
            experiment=experiment.name,
            output_dir=str(output_dir),
            extra={"pid": os.getpid(), "jobs": self.options.jobs},
        )
        submission.save()
        _Scheduler(self, experiment, servers, output_dir, submission, console, resume).run()
        return submission

    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        states = read_run_statuses(Path(submission.output_dir))
        alive = _pid_alive(submission.extra.get("pid"))
        for st in states.values():
            if not alive and st.get("state") in LIVE_STATES:
                st["state"] = "failed"
                st.setdefault("error", "the arena process that ran this submission is gone")
        return states

    def prepare_resume(self, output_dir: Path, runs: list[str]) -> None:
        mark_resumed(output_dir, runs)

    def cancel(self, submission: Submission) -> None:
        pid = submission.extra.get("pid")
        if _pid_alive(pid):
            os.kill(int(pid), signal.SIGTERM)


def _gpu_plan(pool: GpuPool, task, owner: str) -> str:
    """What ``--dry-run`` says about a server's GPUs (servers take them in this order)."""
    wanted = task.gpu_count
    if wanted == 0 and task.gpus is None:
        return "GPUs: none asked for (CUDA_VISIBLE_DEVICES left as it is)"
    shortage = pool.shortage(wanted, task.gpus)
    if shortage:
        return f"GPUs: cannot start: {shortage}; its runs would fail"
    taken = pool.take(owner, wanted, task.gpus)
    if taken is None:
        return f"GPUs: {wanted} wanted, held by {', '.join(pool.held_by(task.gpus, wanted))}: queued until they are free"
    order, why = cuda_device_order({**os.environ, **task.env})
    return (
        f"GPUs: CUDA_VISIBLE_DEVICES={','.join(taken)} (of {', '.join(pool.devices)}; {pool.source}), "
        f"CUDA_DEVICE_ORDER={order} ({why})"
    )


def _pid_alive(pid: Any) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True


class _Scheduler:
    """Single-threaded: servers and runners are spawned from this thread and polled."""

    def __init__(
        self, backend, experiment, servers, output_dir: Path, submission: Submission, console,
        resume: Resume | None = None,
    ) -> None:
        self.backend = backend
        self.options: LocalOptions = backend.options
        self.experiment = experiment
        self.output_dir = output_dir
        self.submission = submission
        self.console = console
        self.resume = resume
        self.instances = backend._instances(experiment, servers)
        self.gpus = GpuPool(*discover_gpus())
        self.keys: dict[str, str] = {}  # instance key -> generated API key (memory only)
        self.by_run: dict[str, _Instance] = {r: i for i in self.instances.values() for r in i.all_users}
        self.pending: list[str] = list(experiment.runs)
        self.slots: dict[str, _RunSlot] = {}

    def say(self, text: str) -> None:
        """Print rich markup ``text``; whatever it quotes from outside arena must be ``escape``d."""
        if self.console is not None:
            self.console.print(text, highlight=False)

    def run(self) -> None:
        try:
            while self.pending or self.slots:
                self._fill_slots()
                self._advance()
                if self.slots or self.pending:
                    time.sleep(self.options.poll_interval_s)
        except KeyboardInterrupt:
            self.say("[yellow]interrupted: stopping runners and servers; finished episodes are kept[/]")
            self._cancel_everything()
            raise
        except OSError as exc:  # the output directory cannot be written (disk full, read-only)
            from arena.errors import LaunchError, unwritable

            self.say(f"[red]{escape(unwritable(exc))}: stopping runners and servers[/]")
            try:
                self._cancel_everything()
            except OSError:  # their states cannot be written either; `arena status` sees them gone
                pass
            raise LaunchError(unwritable(exc)) from exc
        finally:
            self._stop_all_servers()

    # -- scheduling ---------------------------------------------------------------------------
    def _fill_slots(self) -> None:
        while self.pending and len(self.slots) < self.options.jobs:
            name = self.pending.pop(0)
            inst = self.by_run.get(name)
            self.slots[name] = _RunSlot(name=name, instance=inst)
            if inst is not None and inst.server is not None:
                update_status(run_dir(self.output_dir, name), "starting_server")
                if inst.server.state == "pending":
                    self._start_server(inst)

    def _start_server(self, inst: _Instance) -> None:
        """Start the instance's server once its GPUs are free (it stays ``pending`` until then;
        one that can never get them fails)."""
        server = inst.server
        assert server is not None and inst.exposure is not None
        task = server.task
        shortage = self.gpus.shortage(task.gpu_count, task.gpus)
        if shortage:
            server.state, server.error = "failed", f"server '{task.name}' cannot start on this machine: {shortage}"
            return
        gpus: list[str] | None = None
        if task.gpu_count or task.gpus is not None:
            gpus = self.gpus.take(inst.key, task.gpu_count, task.gpus)
            if gpus is None:
                if inst.waiting_note is None:
                    holders = [self.instances[k].server.task.name for k in self.gpus.held_by(task.gpus, task.gpu_count)]
                    inst.waiting_note = f"server {task.name} waits for {task.gpu_count} GPU(s) held by {', '.join(holders)}"
                    self.say(escape(inst.waiting_note))
                return
            server.env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
            server.env["CUDA_DEVICE_ORDER"] = cuda_device_order({**os.environ, **task.env})[0]
            server.gpus = gpus
        if inst.exposure.key == "generated":
            key = self.keys.setdefault(inst.key, generate_key())
            server.env[GENERATED_KEY_ENV] = key
        server.probe_key = self._client_key(inst)
        server.log_path = self.output_dir / SERVERS_DIR / f"{task.name}-{list(self.instances).index(inst.key)}.log"
        server.start()
        if server.state == "failed":  # its program is not here: the runs that need it fail, saying why
            self.say(f"[red]server {escape(task.name)} failed[/]: {escape(str(server.error))}")
            return
        gpu_note = (
            f", CUDA_VISIBLE_DEVICES={server.env['CUDA_VISIBLE_DEVICES']} (CUDA_DEVICE_ORDER={server.env['CUDA_DEVICE_ORDER']})"
            if gpus is not None else ""
        )
        server.note(f"{inst.exposure.describe()}{gpu_note}")
        self.say(
            f"starting server [bold]{escape(task.name)}[/] on {escape(server.host)}:{server.port} for {escape(', '.join(inst.all_users))}"
            f"{escape(gpu_note)}"
        )
        if inst.exposure.exposed:
            self.say(f"[yellow]{escape(inst.exposure.describe())}[/]")

    def _client_key(self, inst: _Instance) -> str | None:
        """The key the clients of ``inst`` (and its readiness probe) present."""
        assert inst.exposure is not None
        if inst.exposure.key == "generated":
            return self.keys.get(inst.key)
        name = inst.exposure.client_key_env
        return os.environ.get(name) if name else None

    def _watch_servers(self) -> None:
        """Poll the servers of running runners: a crashed one is restarted (bounded)."""
        for inst in self.instances.values():
            server = inst.server
            if server is None or server.state not in ("ready", "starting") or server.restarts == 0 and server.state == "starting":
                continue
            if not any(slot.proc is not None and slot.instance is inst for slot in self.slots.values()):
                continue
            before = (server.state, server.restarts)
            state = server.poll()
            if (state, server.restarts) == before:
                continue
            if state == "starting":
                self.say(
                    f"[yellow]server {escape(server.task.name)} {escape(server.last_exit)}: restarting it on {escape(server.host)}:{server.port} "
                    f"({server.restarts}/{server.max_restarts})[/]"
                )
            elif state == "ready":
                self.say(escape(f"server {server.task.name} is ready again on {server.host}:{server.port}"))
            elif state == "failed":
                self.say(f"[red]server {escape(server.task.name)} failed[/]: {escape(str(server.error))}")

    def _advance(self) -> None:
        self._watch_servers()
        for name, slot in list(self.slots.items()):
            if slot.proc is None:
                server = slot.instance.server if slot.instance else None
                if server is None:
                    self._launch_runner(slot, None)
                    continue
                if server.state == "pending":  # waiting for its GPUs
                    self._start_server(slot.instance)
                state = server.poll()
                if state == "ready":
                    self._launch_runner(slot, server)
                elif state in ("failed", "stopped"):
                    reason = server.error or f"server '{server.task.name}' is not running"
                    self.say(f"[red]run {escape(name)} failed[/]: {escape(reason)}")
                    exposure = slot.instance.exposure if slot.instance else None
                    finish_after_runner(self.output_dir, name, state="failed", error=reason,
                                        server=_server_info(server, exposure), runner_started=False)
                    self._finish(slot)
            elif slot.proc.poll() is not None:
                code = slot.proc.returncode
                self._runner_ended(name, code)
                self.say(escape(f"run {name} finished (exit {code})"))
                self._finish(slot)

    def _runner_ended(self, name: str, code: int | None, cancelled: bool = False) -> None:
        """The final state of a run whose runner exited without writing one: the records', or
        why it ended (:func:`arena.outputs.runstate.finish_after_runner`, as the node supervisor)."""
        reason = "cancelled" if cancelled else f"the runner exited with code {code} without finishing (see {RUNNER_LOG})"
        finish_after_runner(self.output_dir, name, state="cancelled" if cancelled else "failed", error=reason)

    def _launch_runner(self, slot: _RunSlot, server: LocalServer | None) -> None:
        inst = slot.instance
        exposure, key = (inst.exposure, self.keys.get(inst.key)) if inst is not None else (None, None)
        queue = self.options.work == "queue"
        if queue:  # its episodes, claimed by its runner (one per run here; Ray nodes share them)
            from arena.launch.queueing import load_runs

            load_runs(self.output_dir, self.experiment, [slot.name], self.resume)
        invocation = self.backend._invocation(self.output_dir, slot.name, server, exposure, key, self.resume, queue)
        env = {**os.environ, **invocation.environment()}
        argv = invocation.argv()
        slot.proc = spawn(argv, run_dir(self.output_dir, slot.name) / RUNNER_LOG, env)
        self.submission.ids[slot.name] = {"0": str(slot.proc.pid)}
        self.submission.save()
        self.say(f"run [bold]{escape(slot.name)}[/] started (pid {slot.proc.pid})")

    def _finish(self, slot: _RunSlot) -> None:
        self.slots.pop(slot.name, None)
        inst = slot.instance
        if inst is None or inst.server is None:
            return
        inst.users.discard(slot.name)
        if not inst.users:
            self._stop_server(inst)

    def _copy_server_log(self, inst: _Instance) -> None:
        assert inst.server is not None
        src = inst.server.log_path
        if not src.exists():
            return
        for run in inst.all_users:
            dst = run_dir(self.output_dir, run) / SERVER_LOG
            try:
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
            except OSError as exc:  # a full disk must not hide why the run failed
                self.say(f"[yellow]cannot copy the server log to {escape(str(dst))}: {escape(str(exc.strerror or exc))}[/]")

    # -- shutting down ------------------------------------------------------------------------
    def _cancel_everything(self) -> None:
        for name in self.pending:  # never started: none of its episodes ran
            total = self.experiment.runs[name].rollout_limit.num_episodes
            update_status(run_dir(self.output_dir, name), "cancelled", episodes_total=total)
        self.pending = []
        for slot in self.slots.values():  # all at once, so their grace periods overlap
            if slot.proc is not None and slot.proc.poll() is None:
                signal_group(slot.proc, signal.SIGTERM)
        for name, slot in list(self.slots.items()):
            if slot.proc is not None:
                terminate(slot.proc, grace_s=10.0)
                self._runner_ended(name, slot.proc.returncode, cancelled=True)
            else:
                update_status(run_dir(self.output_dir, name), "cancelled")
            self._finish(slot)

    def _stop_server(self, inst: _Instance) -> None:
        assert inst.server is not None
        inst.server.stop()
        if inst.server.gpus:
            self.gpus.give_back(inst.server.gpus)
        self._copy_server_log(inst)

    def _stop_all_servers(self) -> None:
        for inst in self.instances.values():
            if inst.server is not None and inst.server.state in ("starting", "ready"):
                self._stop_server(inst)


def mark_resumed(output_dir: Path, runs: list[str]) -> None:
    """Before a local resume: the runs' ``status.json`` still say how the earlier attempt
    ended (``cancelled``, ``failed``); they are ``pending`` again until their runner starts."""
    for run in runs:
        update_status(run_dir(output_dir, run), "pending", error=None)


def _server_info(server: LocalServer, exposure: Exposure | None) -> dict[str, Any]:
    """What ``run_result.json`` records about the server: endpoint, log, pid, who can reach
    it (bind, exposed, whether it requires a key: names, never the key) and its GPUs."""
    info: dict[str, Any] = {
        "task": server.task.name, "host": server.host, "port": server.port, "log": SERVER_LOG, "pid": server.pid,
        "image": None,  # the local backend runs the task's local_command, never its container
    }
    if exposure is not None:
        info.update(bind=exposure.bind, exposed=exposure.exposed, api_key=exposure.key)
    if server.gpus is not None:
        info["gpus"] = list(server.gpus)
    return info
