"""The ``ray`` launch backend: each server group as ``launch.ray.nodes`` Ray tasks running ``arena node``.

A server group is the runs that share one policy server (the same server task,
:func:`arena.launch.planning.server_groups`, as the local backend decides); a run without a
server arena starts is a group of its own. ``submit`` writes each group's node spec to
``<output_dir>/ray/<first run>.node.json``, loads the runs' episodes into the work queue
(``work: queue``, :mod:`arena.launch.queueing`), connects to Ray (``address``: a loopback
instance of its own for ``local``, else the cluster named) and submits one task per (group,
node) with the server task's resources: each task starts the server once and runs the
group's runners beside it (:mod:`arena.launch.node`); then it polls the tasks
(:meth:`LaunchBackend.wait`) until every one has ended. That is all it does: the node
supervisor starts the server, runs the runner and writes the states, as on Slurm and OSMO.

The tasks belong to the ``arena run`` process that submitted them (the Ray driver), so a Ray
submission always waits, like a local one; ``arena cancel`` sends that process SIGTERM and it
cancels every task (each ``arena node`` gets SIGTERM: its run is recorded ``cancelled``).
Tasks are not retried by Ray (``max_retries=0``): with the queue, a lost node's leased
episodes lapse and the other tasks of the run claim them; with ``work: static`` a lost task's
shard is left for ``arena run --resume``.

A lost head is decided here (Ray's driver keeps retrying its GCS instead): each poll probes the
head's GCS address; a task ending with its node as the probe fails, or ``head_timeout_s``
seconds of failed probes, end every run ``failed`` naming the head (see ``_head_lost``).

Ray's own listeners bind loopback when it starts the instance (``address: local``):
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` and ``127.0.0.1`` as the node address. Stopping it
stops only the processes it started (``ray.shutdown``), never ``ray stop``.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from arena.errors import ConfigError, LaunchError
from arena.launch.base import LaunchBackend, Poll, Resume, Submission
from arena.launch.planning import started_task
from arena.outputs.layout import MANIFEST_FILE, RUN_RESULT_FILE, RUNNER_LOG, STATUS_FILE, run_dir, work_dir
from arena.outputs.records import LIVE_STATES, StatusWriter, read_json, write_json_atomic
from arena.outputs.runstate import finish_after_runner, update_status

from arena_ray.options import RayOptions
from arena_ray.render import (
    SPECS_DIR,
    arena_command,
    groups,
    node_spec,
    rayjob_manifest,
    server_exposure,
    shard_words,
    spec_file,
    task_resources,
)

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan

#: Set before Ray starts: its processes then listen on the node address given (loopback).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: Variables of this process handed to every ``arena node`` (same paths on every node).
PASSED_ENV = ("PYTHONPATH", "ARENA_VENVS", "ARENA_PLUGINS")


class _Task:
    def __init__(self, runs: list[str], k: int, ref: Any, shard: tuple[int, int] | None) -> None:
        self.runs, self.k, self.ref, self.shard = runs, k, ref, shard
        self.code: int | None = None
        self.error: str | None = None
        self.done = False


class RayBackend(LaunchBackend):
    """Runs on a Ray cluster (or a loopback instance of its own); ``arena run`` waits."""

    name = "ray"
    Config = RayOptions
    can_resume = True
    always_waits = True
    shared_filesystem = True  # the nodes write into the output directory (the queue needs it too)
    options: RayOptions

    def __init__(self, options: RayOptions) -> None:
        super().__init__(options)
        self._tasks: list[_Task] = []
        self._started_ray = False
        self._gcs: str | None = None  # the head's GCS address (host:port), probed while polling
        self._unreachable_since: float | None = None

    # -- planning ------------------------------------------------------------------------------
    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse what Ray tasks cannot run.

        Raises:
            ConfigError: a server task has only a container image (a task runs its
                ``local_command``); its venv is missing; a run of several static shards or
                queue runners has ``rollout_limit.stop_when`` (the rule sees one process's episodes).
        """
        for run, plan in servers.items():
            task = plan.task
            if task is None or plan.external:
                continue
            if not task.local_command:
                raise ConfigError(
                    f"server task '{task.name}' has only a container image ({task.image}); a Ray task runs its "
                    "local_command: give it one, use --backend slurm or osmo, or start the server yourself "
                    "(`server: {external: true}`)", file=experiment.source, run=run, key="server",
                )
            problem = task.missing_venv()
            if problem is not None:
                raise ConfigError(problem, file=experiment.source, run=run, key="server.venv")
        if self.options.nodes > 1:
            for name, run in experiment.runs.items():
                if run.rollout_limit.stop_when is not None:
                    raise ConfigError(
                        f"rollout_limit.stop_when needs all of a run's episodes in one process: set launch.ray.nodes=1 "
                        f"(now {self.options.nodes})", file=experiment.source, run=name, key="rollout_limit.stop_when",
                    )

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        """What ``submit`` would do: per server group, its Ray resources and the task's command
        (the node spec it names is printed once), the policy servers it starts, then the
        KubeRay ``RayJob`` manifest (YAML)."""
        import yaml

        from arena.launch.wording import count, run_names

        self.check(experiment, servers)
        o = self.options
        found = groups(experiment, servers)
        lines = [f"# ray backend: address {o.address}; {o.nodes} task(s) per server group (work: {o.work}); "
                 f"output {output_dir}"]
        first = None
        for group in found:
            plan = servers.get(group[0])
            resources = ", ".join(f"{k}={v}" for k, v in task_resources(plan, o, len(group)).items())
            argv = self._node_argv(output_dir, group, 0)
            what = f"run {group[0]}" if len(group) == 1 else f"server group of {run_names(group)}"
            lines.append(f"# {what}: {o.nodes} x ray.remote({resources}, max_retries=0)")
            lines.append("#   " + " ".join(argv) + (f"  (K = 0..{o.nodes - 1})" if o.nodes > 1 else ""))
            first = first or (group, plan)
        if first is not None:
            spec = node_spec(first[0][0], first[1], o, output_dir, first[0][1:])
            server = spec.server.command if spec.server is not None else "none (a local policy or an external server)"
            lines.append(f"# each task's arena node ({SPECS_DIR}/RUN.node.json) starts the server once on its node: {server}")
        for exposure in dict.fromkeys(e.describe() for g in found if (e := server_exposure(servers.get(g[0]))) is not None):
            lines.append(f"# {exposure}")
        started = sum(o.nodes for g in found if started_task(servers.get(g[0])) is not None)
        lines.append(f"# policy servers started: {started} ({o.nodes} per server group; "
                     f"{count(len(experiment.runs), 'run')} in {count(len(found), 'group')})")
        lines.append("# the same on Kubernetes: a KubeRay RayJob (not validated against the CRD here: none of the "
                     "installed packages ships its schema)")
        lines.append(yaml.safe_dump(rayjob_manifest(experiment, servers, o, output_dir), sort_keys=False).rstrip())
        return "\n".join(lines)

    def _node_argv(self, output_dir: Path, group: list[str], k: int, resume: Resume | None = None) -> list[str]:
        spec = Path(output_dir) / SPECS_DIR / spec_file(group)
        flags = ["--resume", *(["--keep-errors"] if resume.keep_errors else [])] if resume is not None else []
        return [*arena_command(self.options), "node", str(spec), *shard_words(k, self.options), *flags]

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
        """Submit every run's tasks and wait for them (the tasks belong to this process).

        Raises:
            LaunchError: ``ray`` is not installed or the cluster cannot be reached.
        """
        self.check(experiment, servers)
        output_dir = Path(output_dir).resolve()  # the nodes may start elsewhere
        o = self.options
        specs = output_dir / SPECS_DIR
        specs.mkdir(parents=True, exist_ok=True)
        found = groups(experiment, servers)
        for group in found:
            spec = node_spec(group[0], servers.get(group[0]), o, output_dir, group[1:])
            (specs / spec_file(group)).write_text(spec.model_dump_json(indent=2))
        if o.work == "queue":
            from arena.launch.queueing import load_runs

            load_runs(output_dir, experiment, list(experiment.runs), resume)
        submission = Submission(
            backend=self.name, experiment=experiment.name, output_dir=str(output_dir),
            extra={"pid": os.getpid(), "waits": True, "address": o.address, "nodes": o.nodes, "work": o.work},
        )
        submission.save()
        ray = self._connect(console)
        try:
            remote = ray.remote(_run_node_task)
            env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
            env["ARENA_QUEUE_LEASE_S"] = f"{o.lease_s:g}"
            for group in found:
                for k in range(o.nodes):
                    shard = (k, o.nodes) if o.nodes > 1 else None
                    if (resume is not None and o.work == "static" and shard
                            and not any(resume.shard_has_work(run, k, o.nodes) for run in group)):
                        continue
                    for run in group:
                        update_status(work_dir(output_dir, run, k if shard else None), "pending",
                                      **({"shard": list(shard)} if shard else {}))
                    log = work_dir(output_dir, group[0], k if shard else None) / "node.log"
                    ref = remote.options(
                        name=f"arena-node:{group[0]}:{k}", max_retries=0,
                        **task_resources(servers.get(group[0]), o, len(group)),
                    ).remote(self._node_argv(output_dir, group, k, resume), str(log), env, o.cancel_grace_s)
                    self._tasks.append(_Task(group, k, ref, shard))
                    for run in group:
                        submission.ids.setdefault(run, {})[str(k)] = ref.task_id().hex()
            submission.save()
            if console is not None:
                console.print(f"submitted {len(self._tasks)} Ray task(s) for {len(experiment.runs)} run(s) "
                              f"({len(found)} server group(s))", highlight=False)
            try:
                self.wait(submission, console)
            except KeyboardInterrupt:
                if console is not None:
                    console.print("[yellow]interrupted: cancelling every Ray task; finished episodes are kept[/]")
                self._cancel_tasks(ray)
                raise
            finally:
                self._finalize(output_dir, experiment)
        finally:
            if self._started_ray:
                ray.shutdown()
        return submission

    def _connect(self, console: Console | None) -> Any:
        for name, value in LOOPBACK_ENV.items():
            os.environ.setdefault(name, value)
        try:
            import ray
        except ImportError:
            raise LaunchError("the ray backend needs the `ray` package here: pip install 'ray>=2.9'") from None
        if ray.is_initialized():
            return ray
        # Ray's core installs its own SIGTERM handler (log a stack, exit 15); arena's, which turns
        # SIGTERM into cancelling every task (arena cancel), is put back once Ray is up
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            if self.options.address == "local":
                ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                         num_cpus=self.options.local_cpus, log_to_driver=False, configure_logging=False)
                self._started_ray = True
            else:
                ray.init(address=self.options.address, log_to_driver=False, configure_logging=False)
        except Exception as exc:  # ConnectionError, a bad address
            raise LaunchError(f"cannot reach the Ray cluster at launch.ray.address={self.options.address}: {exc}") from exc
        finally:
            if threading.current_thread() is threading.main_thread():
                for sig, handler in handlers.items():
                    if handler is not None:
                        signal.signal(sig, handler)
        try:
            self._gcs = str(ray.get_runtime_context().gcs_address) or None
        except Exception:  # a Ray client connection (ray://) has none: its server watches the head
            self._gcs = None
        if console is not None:
            where = "a local instance (loopback)" if self._started_ray else self.options.address
            console.print(f"ray: {escape(where)}; {escape(str(ray.cluster_resources()))}", highlight=False)
        return ray

    def poll(self, submission: Submission, console: Console | None = None) -> Poll:
        """One look at this process's tasks: those ended since the last look are noted."""
        import ray

        pending = [t for t in self._tasks if not t.done]
        notes: list[str] = []
        failed_now = False
        if pending:
            ready, _ = ray.wait([t.ref for t in pending], num_returns=len(pending), timeout=0)
            ready_ids = {r.task_id().hex() for r in ready}
            for task in pending:
                if task.ref.task_id().hex() not in ready_ids:
                    continue
                task.done = True
                try:
                    task.code = int(ray.get(task.ref)["code"])
                except Exception as exc:  # the node died, the task was cancelled
                    task.error = f"its Ray task ended: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    failed_now = True
                where = f" task {task.k}" if task.shard else ""
                what = f"exit {task.code}" if task.error is None else task.error
                runs = f"run {task.runs[0]}" if len(task.runs) == 1 else f"runs {', '.join(task.runs)}"
                notes.append(escape(f"{runs}{where}: {what}"))
        lost = self._head_lost(failed_now)
        if lost is not None:  # nothing more will come from the cluster: every task ends with why
            for task in self._tasks:
                if not task.done or task.error is not None:
                    task.done, task.code, task.error = True, None, lost
            notes.append(f"[red]{escape(lost)}[/]")
        left = sum(1 for t in self._tasks if not t.done)
        return Poll(done=left == 0, summary=f"ray: {len(self._tasks) - left}/{len(self._tasks)} task(s) ended", notes=tuple(notes))

    def _head_lost(self, task_failed: bool) -> str | None:
        """Why the run cannot go on when the cluster's head is gone, else ``None``.

        The head's GCS is probed (a TCP connect to its address) at each poll: Ray does not
        report a lost head to a driver as such (its GCS client keeps retrying in the background;
        only the tasks whose own node died end), so arena decides itself. The head is
        lost when the probe fails as a task ends with a Ray error (the head's own node died with
        it), or has failed for ``head_timeout_s`` seconds in a row."""
        if not self._gcs:
            return None
        host, _, port = self._gcs.rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
        except (OSError, ValueError):
            now = time.monotonic()
            self._unreachable_since = self._unreachable_since or now
            if task_failed or now - self._unreachable_since >= self.options.head_timeout_s:
                where = self.options.address if self.options.address in ("local", "auto") else ""
                return (f"the Ray cluster was lost: its head (GCS at {self._gcs}{f', address: {where}' if where else ''}) "
                        f"stopped answering; the episodes recorded are kept, `arena run --resume` runs the rest on a "
                        "cluster that is up")
            return None
        self._unreachable_since = None
        return None

    def _cancel_tasks(self, ray: Any) -> None:
        for task in self._tasks:
            if not task.done:
                try:
                    ray.cancel(task.ref)  # KeyboardInterrupt in the task: arena node gets SIGTERM
                except Exception:  # already ended
                    pass
        refs = [t.ref for t in self._tasks if not t.done]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=self.options.cancel_grace_s + 10)
        for task in self._tasks:
            if not task.done:
                task.done, task.error = True, "cancelled"

    def _finalize(self, output_dir: Path, experiment: ResolvedExperiment) -> None:
        """Each run's state once its tasks ended: the records decide (a lost node's work
        directory becomes ``completed`` when the others recorded its episodes); a task that
        never wrote a final state is ``failed`` (``cancelled`` after a cancel) with why."""
        from arena.outputs.completion import complete_recorded_run

        # A lost node's runners are stopped by their keeper once their Ray worker is gone, and
        # record themselves cancelled as they stop: wait for that (at most cancel_grace_s) so
        # the failure written below is the last word.
        lost = [work_dir(output_dir, run, t.k if t.shard else None) for t in self._tasks
                if t.error is not None and t.error != "cancelled" for run in t.runs]
        deadline = time.monotonic() + self.options.cancel_grace_s
        while lost and time.monotonic() < deadline and any(_runner_may_live(d) for d in lost):
            time.sleep(0.2)
        for run in experiment.runs:
            if complete_recorded_run(output_dir, run) is not None:
                continue
            for task in (t for t in self._tasks if run in t.runs):
                cancelled = task.error == "cancelled"
                reason = task.error or f"arena node exited with code {task.code} without finishing (see {RUNNER_LOG})"
                fields = {"shard": list(task.shard)} if task.shard else {}
                if task.error is not None and not cancelled:
                    _failed_not_cancelled(work_dir(output_dir, run, task.k if task.shard else None), reason)
                finish_after_runner(output_dir, run, state="cancelled" if cancelled else "failed",
                                    error="cancelled" if cancelled else reason, **fields)

    # -- later ---------------------------------------------------------------------------------
    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per submitted run: its state (its tasks' work directories merged), episode counts
        from the records and the errors; live states of a submission whose ``arena run`` is
        gone are ``failed`` (its tasks went with it)."""
        from arena.results.run_summary import summarize_run

        output_dir = Path(submission.output_dir)
        manifest = read_json(output_dir / MANIFEST_FILE)
        entries = manifest.get("runs", {}) if isinstance(manifest, dict) else {}
        alive = _pid_alive(submission.extra.get("pid"))
        report: dict[str, dict[str, Any]] = {}
        for run in submission.ids:
            summary = summarize_run(output_dir, run, entries.get(run))
            state, error = summary["state"], summary.get("error")
            if not alive and state in LIVE_STATES:
                state, error = "failed", error or "the arena process that submitted the Ray tasks is gone"
            report[run] = {
                "state": state, "episodes_done": summary["episodes_recorded"], "episodes_total": summary["episodes_total"],
                "successes": summary["counts"]["success"], "errors": summary["counts"]["error"], "error": error,
                "ray_tasks": dict(submission.ids[run]),
            }
        return report

    def prepare_resume(self, output_dir: Path, runs: list[str]) -> None:
        for run in runs:
            update_status(run_dir(output_dir, run), "pending", error=None)

    def cancel(self, submission: Submission) -> None:
        """SIGTERM to the submitting ``arena run``: it cancels every task and records why."""
        pid = submission.extra.get("pid")
        if _pid_alive(pid):
            os.kill(int(pid), signal.SIGTERM)


def _runner_may_live(directory: Path) -> bool:
    """Whether the runner of ``directory`` may still be about to write its final state: it has
    none yet and its process is alive here or runs on another machine (not known from here)."""
    from arena.outputs.runstate import final_state

    status = read_json(directory / STATUS_FILE)
    if not isinstance(status, dict) or final_state(directory) is not None or not status.get("pid"):
        return False
    host = status.get("hostname") or status.get("node")
    return host != socket.gethostname() or _pid_alive(status["pid"])


def _failed_not_cancelled(directory: Path, reason: str) -> None:
    """A runner whose Ray worker died (its node lost) was stopped by a signal and recorded itself
    ``cancelled``; no one cancelled it: its work directory becomes ``failed`` with ``reason``."""
    result = read_json(directory / RUN_RESULT_FILE)
    if not (isinstance(result, dict) and result.get("state") == "cancelled"):
        return
    status = read_json(directory / STATUS_FILE)
    fields = {k: v for k, v in (status if isinstance(status, dict) else {}).items() if k not in ("state", "error")}
    StatusWriter(directory / STATUS_FILE, **fields).write(state="failed", error=reason)
    write_json_atomic(directory / RUN_RESULT_FILE, {**result, "state": "failed", "error": reason})



def _run_node_task(argv: list[str], log_path: str, env: dict[str, str], grace_s: float) -> dict:
    from arena_ray.tasks import run_node

    return run_node(argv, log_path, env, grace_s)


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
