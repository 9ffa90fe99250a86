"""``arena run-one``: execute one run (or one shard of it) from a resolved snapshot.

Writes into ``<output_dir>/<run>/`` (shard ``K``: ``<output_dir>/<run>/shards/<K>/``):

- ``episodes.jsonl``: one record per finished episode (fsync-ed as it ends);
- ``status.json``: ``running`` while it works (``last_progress_at`` advances on every episode
  end and at least every :data:`PROGRESS_INTERVAL_S` seconds while env steps progress), then
  ``completed``, ``failed`` or ``cancelled``;
- ``run_result.json``: ``run``, ``state``, ``counts`` per outcome, ``episodes``,
  ``episodes_total``, ``success_rate`` (k/n over non-error episodes; ``null`` when n = 0),
  ``ci95`` (Wilson), ``error``, ``started_at``, ``finished_at``, ``server``, ``shard``,
  ``machine`` (host name, platform, Python of the process that ran it), ``warnings``
  (caveats of the numbers, e.g. an environment without a success signal or a fixed
  ``remote_port`` arena did not use; also in ``status.json``), ``model`` (what answered a
  remote policy, :func:`model_record`);
- ``videos/``: one file per recorded episode when ``recording.enabled`` (see
  :mod:`arena.rollout.recording`);
- ``trajectories/``: one ``.npz`` of observations, actions and rewards per recorded episode
  when ``trajectories.enabled`` (see :mod:`arena.rollout.trajectories`).

With ``launch.watchdog`` set in the snapshot, run-one supervises itself: the rollout runs in
a child ``arena run-one`` and :mod:`arena.rollout.watchdog` restarts it (resuming) when
``status.json`` shows no progress. ``$ARENA_WATCHDOG_CHILD`` marks that child.

SIGTERM ends the run ``cancelled`` (``arena cancel``, ``scancel``). SIGUSR1 asks it to stop
and end ``failed`` for a reason of the backend's: the text of ``stop_reason`` in the run's
directory when the backend wrote one there first (e.g. "its policy server died and could not
be restarted"), otherwise the scheduler's time limit is near (Slurm's ``--signal``) and the
error names the limit as ``$ARENA_TIME_LIMIT`` describes it (e.g. ``launch.slurm.time=02:00:00``)
and how to continue (``arena run --resume``). Finished episodes are kept either way. A stop
signal (SIGTERM, SIGUSR1 or SIGINT) that comes once every work item is recorded (e.g. while
the environment is closing) changes nothing: the final state follows the records, so the run
is ``completed``.

Exit codes: 0 completed with no ``error`` episode; 3 aborted, failed, cancelled (SIGTERM),
stopped at a time limit (SIGUSR1) or any ``error`` episode; 2 configuration error (message on
stderr).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.envs.workers import WorkerEnvironment, build_environment
from arena.errors import ConfigError, PluginError, unwritable
from arena.outputs.layout import (
    EPISODES_FILE, QUEUE_FILE, RUN_RESULT_FILE, STATUS_FILE, STOP_REASON_FILE, run_dir, work_dir,
)
from arena.outputs.records import (
    EpisodeRecord,
    RecordWriter,
    StatusWriter,
    count_outcomes,
    merge_records,
    read_json,
    jsonable,
    read_records,
    utc_now,
    write_json_atomic,
    write_run_result,
)
from arena.rollout.invocation import (
    SERVER_API_KEY_ENV_ENV,
    SERVER_HOST_ENV,
    SERVER_INFO_ENV,
    SERVER_PORT_ENV,
    SERVER_TASK_ENV,
    TIME_LIMIT_ENV,
    WATCHDOG_CHILD_ENV,
    RunOneInvocation,
)
from arena.rollout.rollout import RolloutSummary, rollout
from arena.outputs.stopping import make_stopper, stop_record
from arena.rollout.workitems import plan_work_items, select_shard

#: Seconds between ``last_progress_at`` updates while steps progress without episode ends.
PROGRESS_INTERVAL_S = 5.0

EXIT_OK = 0
EXIT_CONFIG = 2
EXIT_RUN = 3


class RunCancelled(BaseException):
    """Raised inside run-one by SIGTERM (or SIGUSR1); not an ``Exception`` so the rollout lets it through."""


def time_limit_error(done: int, total: int, output_dir: str | os.PathLike[str] = "OUTPUT_DIR") -> str:
    """The error of a run stopped because the scheduler's time limit was near (SIGUSR1)."""
    limit = os.environ.get(TIME_LIMIT_ENV) or "the scheduler's time limit"
    return (
        f"stopped at the time limit ({limit}) before the run finished: {done} of {total} episode(s) recorded; "
        f"`arena run --resume {output_dir}` runs the rest (or raise the limit)"
    )


def run_one(
    snapshot_path: str | os.PathLike[str],
    run_name: str,
    output_dir: str | os.PathLike[str],
    *,
    server_host: str | None = None,
    server_port: int | None = None,
    server_api_key_env: str | None = None,
    shard: tuple[int, int] | None = None,
    queue: bool = False,
    resume: bool = False,
    keep_errors: bool = False,
    manager: Any = None,
    watchdog: bool = True,
    allow_imports: Sequence[str] = (),
) -> int:
    """Execute run ``run_name`` of the snapshot ``snapshot_path``; return the exit code.

    ``server_host`` / ``server_port`` (else ``$ARENA_SERVER_HOST`` / ``$ARENA_SERVER_PORT``)
    override a remote policy's ``remote_host`` / ``remote_port``; ``server_api_key_env`` (else
    ``$ARENA_SERVER_API_KEY_ENV``) its ``api_key_env``: the NAME of the variable holding the key
    of the server the backend started (the key itself never reaches a file). ``shard=(K, N)`` runs the
    work items whose index is ``K`` mod ``N``. ``queue`` claims the run's items from
    ``<output_dir>/queue.sqlite`` instead (:mod:`arena.rollout.claims`; a backend loaded them
    there), each record kept only when its finish is the item's first; with ``shard`` the
    runner shares the run with others and ``K`` only names its work directory. ``resume`` skips items that already have a
    non-error record in this invocation's ``episodes.jsonl`` (``keep_errors``: any record,
    so ``error`` episodes are not retried); without it an existing file is moved aside to
    ``episodes.jsonl.<timestamp>.bak``. ``manager`` is the plugin manager (default: the
    process-wide one). ``watchdog=False`` ignores ``launch.watchdog`` (the supervised child
    is told so through ``$ARENA_WATCHDOG_CHILD``). ``allow_imports`` adds to the modules the
    snapshot's ``allow_imports`` lets ``package.module:Class`` types import.
    """
    try:
        loaded = _load_run(
            snapshot_path, run_name, server_host, server_port, server_api_key_env, manager, allow_imports
        )
        run, server, watchdog_config = loaded.run, loaded.server, loaded.watchdog
        items = plan_work_items(run)
        if shard is not None:
            if not queue:
                items = select_shard(items, *shard)
            if shard[1] > 1 and run.rollout_limit.stop_when is not None:
                raise ConfigError(
                    f"run {run_name}: rollout_limit.stop_when cannot stop a sharded run (--shard {shard[0]}/{shard[1]}): "
                    "each shard's process sees only its own episodes; run it unsharded"
                )
    except (ConfigError, PluginError, ValueError) as exc:
        print(f"arena run-one: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    invocation_dir = work_dir(output_dir, run_name, shard[0] if shard is not None else None)
    if watchdog and watchdog_config is not None and not os.environ.get(WATCHDOG_CHILD_ENV):
        from arena.rollout.watchdog import supervise

        child = RunOneInvocation(
            snapshot_path, run_name, output_dir, shard=shard, queue=queue, keep_errors=keep_errors, server_host=server_host,
            server_port=server_port, server_api_key_env=server_api_key_env, allow_imports=tuple(allow_imports),
        )
        argv = child.argv()  # the supervisor adds --resume where a child resumes
        return supervise(
            argv, invocation_dir, watchdog_config, resume=resume, run=run_name, shard=shard, episodes_total=len(items)
        )
    from arena.sinks import run_sinks

    with run_sinks(loaded.experiment, output_dir, run_name, shard) as sinks:
        invocation = _Invocation(
            run, items, invocation_dir, run_dir(output_dir, run_name), server, shard, resume,
            keep_errors=keep_errors, task=loaded.task, notes=loaded.notes, sinks=sinks,
            queue=Path(output_dir) / QUEUE_FILE if queue else None,
        )
        return invocation.execute()


def machine_info() -> dict[str, Any]:
    """Where this process runs: ``hostname``, ``platform``, ``python``, ``pid``, ``rendering``
    (MuJoCo's OpenGL platform and who chose it, :func:`arena.rendering.rendering_info`)."""
    import platform
    import socket

    from arena.rendering import rendering_info

    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pid": os.getpid(),
        "rendering": rendering_info(),
    }


@dataclass
class _Loaded:
    run: Any
    server: dict | None
    watchdog: Any
    task: dict[str, Any] | None  # the ServerTask a backend started for the run (server_task_identity), or None
    notes: list[str]  # caveats known before the run starts
    experiment: Any = None  # the snapshot's ResolvedExperiment (its result sinks)


def _load_run(
    snapshot_path, run_name, server_host, server_port, server_api_key_env, manager, allow_imports=()
) -> _Loaded:
    from arena.config import load_experiment

    experiment = load_experiment(
        snapshot_path, manager=manager, check_requires=True, allow_imports=allow_imports, trust_snapshot=True
    )
    if run_name not in experiment.runs:
        known = ", ".join(sorted(experiment.runs)) or "none"
        raise ConfigError(f"no run named '{run_name}' (runs: {known})", file=str(snapshot_path))
    run = experiment.runs[run_name]
    remote = hasattr(run.policy, "remote_host")
    host = server_host or os.environ.get(SERVER_HOST_ENV) or None
    port_text = server_port if server_port is not None else os.environ.get(SERVER_PORT_ENV) or None
    port = None
    if port_text is not None:
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(f"server port {port_text!r} is not an integer", run=run_name) from None
    written_port = getattr(run.policy, "remote_port", None)
    key_env = server_api_key_env or os.environ.get(SERVER_API_KEY_ENV_ENV) or None
    if remote and (host is not None or port is not None or key_env is not None):
        host = host if host is not None else run.policy.remote_host
        port = port if port is not None else run.policy.remote_port
        experiment = experiment.with_policy_endpoint(run_name, host, port, api_key_env=key_env)
        run = experiment.runs[run_name]
    server: dict | None = None
    info = os.environ.get(SERVER_INFO_ENV)
    if info:
        try:
            server = json.loads(info)
        except ValueError:
            server = {"info": info}
    elif remote:
        server = {"host": run.policy.remote_host, "port": run.policy.remote_port}
    task = _server_task()
    notes = []
    used = (server or {}).get("port")
    default = getattr(type(run.policy).model_fields.get("remote_port"), "default", None)
    if task is not None and written_port not in (None, default, used) and used is not None:
        notes.append(
            f"policy.remote_port {written_port} was not used: arena started this run's policy server itself, on port "
            f"{used}; to use a server you run at remote_host:remote_port, set `server: {{external: true}}`"
        )
    return _Loaded(run, server, experiment.launch.watchdog, task, notes, experiment)


def _server_task() -> dict[str, Any] | None:
    """The ServerTask the backend started for the run, as it handed it over
    (``$ARENA_SERVER_TASK``, :func:`arena.rollout.invocation.server_task_identity`), or ``None``:
    no backend started one (an external server, or run-one started by hand)."""
    text = os.environ.get(SERVER_TASK_ENV)
    if not text:
        return None
    try:
        task = json.loads(text)
    except ValueError:
        return None
    return task if isinstance(task, dict) else None


def model_record(run: Any, task: dict[str, Any] | None, server: dict | None, metadata: Any) -> dict[str, Any] | None:
    """What answered a remote run (``run_result.json``'s ``model``); ``None`` for a local policy.

    ``task`` is the ServerTask the backend started (:func:`arena.rollout.invocation.server_task_identity`).
    ``checkpoint`` / ``revision`` come from it (``None`` for an external server),
    ``image`` from the launch backend's ``$ARENA_SERVER_INFO`` when it says (``null``: it ran
    a local command), else the ServerTask's; ``image_digest`` from the backend, else from an
    image pinned as ``name@sha256:…``; ``server_metadata`` is what the server sent.
    """
    if server is None and task is None and metadata is None:
        return None
    info = server or {}
    task = task or {}
    identity = {"checkpoint": task.get("checkpoint"), "revision": task.get("revision")}
    image = info["image"] if "image" in info else task.get("image")
    digest = info.get("image_digest") or (image.split("@", 1)[1] if image and "@sha256:" in image else None)
    return {
        "policy_type": run.policy_type,
        "variant": run.policy.variant(),
        "server_task": task.get("name"),
        **identity,
        "image": image,
        "image_digest": digest,
        "server_metadata": jsonable(metadata),
    }


class _Invocation:
    """One execution of run-one: the run's work items into ``work_dir`` (the run's directory
    ``run_dir``, or a shard's), with what the backend said of the server."""

    def __init__(
        self,
        run: Any,
        items: list,
        work_dir: Path,
        run_dir: Path,
        server: dict | None,
        shard,
        resume: bool,
        *,
        keep_errors: bool = False,
        task: dict[str, Any] | None = None,
        notes: Sequence[str] = (),
        sinks: Any = None,
        queue: Path | None = None,
    ) -> None:
        self.run = run
        self.items = items
        self.work_dir = work_dir
        self.server = server
        self.shard = list(shard) if shard is not None else None
        self.resume = resume
        self.records_path = work_dir / EPISODES_FILE
        self.indices = {item.episode_index for item in items}
        self.merged: dict[int, EpisodeRecord] = {}
        self.recorded_now: set[int] = set()  # episodes recorded by this attempt (errors too)
        self.cancel_requested = False
        self.time_limit = False
        self.armed = False
        self.last_progress = 0.0
        self.keep_errors = keep_errors
        self.run_dir = run_dir
        self.restart_history: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.task = task
        self.notes = list(notes)
        self.metadata: Any = None
        self.stopper: Any = None  # the rule of rollout_limit.stop_when (arena.outputs.stopping)
        self.sinks = sinks  # arena.sinks.Sinks: told of each episode and of the result
        self.queue_path = queue  # the work queue the items are claimed from (None: self.items, in order)
        self.claims: Any = None  # arena.rollout.claims.ClaimedItems while the rollout runs
        # a runner sharing its run with others counts only the episodes it recorded
        self.shared = queue is not None and shard is not None

    # -- main ------------------------------------------------------------------------------
    def execute(self) -> int:
        """Run the work items; return the exit code. An output that cannot be written (disk
        full, read-only directory) fails the run with one line naming the path (exit 3)."""
        try:
            return self._execute()
        except OSError as exc:
            reason = unwritable(exc)
            print(f"arena run-one: run {self.run.name}: failed; {reason}", file=sys.stderr)
            data = dict(self.status.data) if hasattr(self, "status") else {"run": self.run.name}
            data.update(state="failed", error=reason)
            try:  # a status file that still fits says so; a full disk may refuse even that
                StatusWriter(self.work_dir / STATUS_FILE, **data).write()
            except OSError:
                pass
            return EXIT_RUN

    def _execute(self) -> int:
        started_at = utc_now()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / STOP_REASON_FILE).unlink(missing_ok=True)  # an earlier attempt's
        restarts = self._prepare_records()
        self.status = StatusWriter(
            self.work_dir / STATUS_FILE,
            run=self.run.name,
            shard=self.shard,
            restarts=restarts,
            restart_history=self.restart_history,
            error=None,
            hostname=machine_info()["hostname"],
        )
        self.status.progress(**{"state": "running", "episodes_total": self._total(), **self._tallies()})
        earlier = self._earlier_stop()
        self.stopper = make_stopper(self.run.rollout_limit, self.items, self.merged, decided=earlier)
        todo = [item for item in self.items if not self._finished(item.episode_index)]
        if self.stopper is not None:
            decided = earlier or (self.stopper.decision.to_dict() if self.stopper.decision is not None else None)
            if decided is not None:
                # stopped by its rule on an earlier attempt: nothing past the stop is run, its error
                # episodes before it are (unless --keep-errors), and the decision is kept
                todo = [item for item in todo if item.episode_index < decided["episodes_used"]]
            # the error episodes this attempt runs again are pending until their new records
            retried = [item.episode_index for item in todo if item.episode_index in self.merged]
            self.stopper = make_stopper(self.run.rollout_limit, self.items, self.merged, pending=retried, decided=decided)

        state, error = "completed", None
        self.warnings = self._static_warnings()
        env = policy = recorder = trajectories = None
        source: Any = todo
        if self.queue_path is not None:
            from arena.outputs.workqueue import WorkQueue
            from arena.rollout.claims import ClaimedItems

            try:
                queue = WorkQueue(self.queue_path)
                self.claims = source = ClaimedItems(queue, self.run.name)
            except Exception as exc:  # sqlite3.Error, a bad $ARENA_QUEUE_LEASE_S
                todo, state, error = [], "failed", f"cannot use the work queue {self.queue_path}: {_describe(exc)}"
            else:
                held = queue.counts(self.run.name)
                if todo and not any(held.values()):  # nothing was loaded: no backend queued this run
                    todo, state, error = [], "failed", (
                        f"the work queue {self.queue_path} holds no episode of run {self.run.name}: the launch backend "
                        "loads them before it starts runners with --queue (arena.launch.queueing.load_runs)")
                else:
                    todo = todo if queue.outstanding([self.run.name]) else []
        writer = RecordWriter(self.records_path)
        previous_handler = self._install_stop_handlers()
        try:
            self.armed = True
            if self.cancel_requested:  # a signal came before the handler could raise
                raise RunCancelled("a stop signal arrived while the run was starting")
            if todo:
                what = "environment"
                try:
                    # Recording renders only the recorded envs (env.render), so it never
                    # switches cameras on for the whole batch.
                    env = build_environment(
                        self.run.environment_cls, self.run.environment, num_envs=self.run.environment_builder.num_envs,
                        plan=self.run.worker_plan,  # planned once, by the loader
                    )
                    if isinstance(env, WorkerEnvironment):
                        print(f"arena run-one: environment {self.run.environment_type}: {env.describe()}", file=sys.stderr)
                    from arena.envs.perturbed import wrap as perturb

                    env = perturb(env, self.run.environment_cls, self.run.environment)  # itself when unperturbed
                    what = "policy"
                    policy = self.run.policy_cls(self.run.policy)
                    if self.run.execution.live:  # the simulator keeps its clock (arena.live)
                        from arena.live.policy import live_policy

                        policy = live_policy(policy, self.run)
                    if self.run.recording.enabled:
                        from arena.rollout.recording import EpisodeRecorder

                        what = "video recorder"
                        recorder = EpisodeRecorder(self.run.recording, self.work_dir, relative_to=self.run_dir)
                    if self.run.trajectories.enabled:
                        from arena.rollout.trajectories import TrajectoryRecorder

                        what = "trajectory recorder"
                        trajectories = TrajectoryRecorder(
                            self.run.trajectories, self.work_dir, relative_to=self.run_dir,
                            run=self.run.name, task=self.run.environment.task_name(),
                        )
                except Exception as exc:  # e.g. a client that cannot reach its server
                    state, error = "failed", f"could not build the {what}: {_describe(exc)}"
                else:
                    summary = rollout(
                        env,
                        policy,
                        source,
                        self.run.rollout_limit,
                        on_episode_end=lambda record: self._episode_end(writer, record),
                        on_progress=self._progress,
                        task=self.run.environment.task_name(),
                        policy_info={"type": self.run.policy_type, "variant": self.run.policy.variant()},
                        recorder=recorder,
                        trajectories=trajectories,
                        until=self.stopper.reason if self.stopper is not None else None,
                    )
                    self.warnings += [w for w in summary.warnings if w not in self.warnings]
                    if summary.aborted:
                        state, error = "failed", summary.error
        except (RunCancelled, KeyboardInterrupt):
            self.cancel_requested = True
        except OSError as exc:
            output = str(exc.filename or "").startswith(str(self.run_dir))
            state, error = "failed", unwritable(exc) if output else f"run failed: {_describe(exc)}"
        except Exception as exc:
            state, error = "failed", f"run failed: {_describe(exc)}"
        finally:
            self.armed = False
            if self.claims is not None:  # unfinished claims go back to the queue for others
                self.claims.close()
            if policy is not None:
                try:
                    self.metadata = policy.server_metadata()
                except Exception:  # a record of the model is a nicety; never lose the run over it
                    self.metadata = None
            for closable in (policy, env):
                if closable is not None:
                    try:
                        closable.close()
                    except Exception as exc:  # closing must never hide the run's own result
                        print(f"arena run-one: close failed: {_describe(exc)}", file=sys.stderr)
            writer.close()
        try:
            # The final state follows the records: a stop signal that came once every work item
            # was recorded (e.g. while the environment was closing) leaves the run complete.
            complete = self._all_recorded()
            if self.time_limit:
                reason = self._stop_reason()  # read once (and removed) either way
                if not complete:
                    state, error = "failed", reason or time_limit_error(len(self.merged), len(self.items), self.run_dir.parent)
            elif self.cancel_requested and not complete:
                state, error = "cancelled", "cancelled by signal"
            code = self._finish(state, error, started_at)
            if self.shared and state == "completed":  # a dead runner's directory follows the records
                from arena.outputs.completion import complete_recorded_run

                complete_recorded_run(self.run_dir.parent, self.run.name)
            return code
        finally:  # a SIGTERM while the result is written only marks the run cancelled
            self._restore_stop_handlers(previous_handler)

    def _stop_reason(self) -> str | None:
        path = self.work_dir / STOP_REASON_FILE
        try:
            text = path.read_text().strip()
        except OSError:
            return None
        path.unlink(missing_ok=True)  # read once: it becomes the run's error
        return text or None

    # -- records ---------------------------------------------------------------------------
    def _prepare_records(self) -> int:
        """Load (resume) or move aside (fresh start) earlier records; return the restart count."""
        if not self.resume:
            if self.records_path.exists() and self.records_path.stat().st_size > 0:
                stamp = time.strftime("%Y%m%dT%H%M%S")
                self.records_path.rename(self.records_path.with_name(f"{EPISODES_FILE}.{stamp}.bak"))
            return 0
        records, issues = read_records(self.records_path)
        for issue in issues:
            print(f"arena run-one: skipping {issue}", file=sys.stderr)
        for record in merge_records(r for r in records if r.episode_index in self.indices):
            self.merged[record.episode_index] = record
        old = read_json(self.work_dir / STATUS_FILE) or {}
        history = old.get("restart_history")
        if isinstance(history, list):
            self.restart_history = history
        restarts = old.get("restarts", 0)
        return restarts if isinstance(restarts, int) else 0

    def _earlier_stop(self) -> dict[str, Any] | None:
        """The ``stop`` a resumed run's earlier attempt recorded in ``run_result.json`` (its
        decision is kept: :class:`arena.outputs.stopping.SeedOrderStop`), else ``None``."""
        if not self.resume:
            return None
        old = read_json(self.work_dir / RUN_RESULT_FILE)
        stop = old.get("stop") if isinstance(old, dict) else None
        return stop if isinstance(stop, dict) and isinstance(stop.get("episodes_used"), int) else None

    def _static_warnings(self) -> list[str]:
        """Caveats known from the run's configuration alone (kept when nothing is left to run)."""
        from arena.envs.base import success_warning

        try:
            warning = success_warning(self.run.environment_cls)
        except Exception:  # an undeclared signal fails the rollout with its own reason
            warning = None
        return [*self.notes, *([warning] if warning else [])]

    def _stopper_view(self) -> dict[int, EpisodeRecord]:
        """The records the stopping rule takes: all but an earlier attempt's error episodes that
        this attempt runs again (pending until their new record)."""
        return {i: r for i, r in self.merged.items() if i in self.recorded_now or self._finished(i)}

    def _all_recorded(self) -> bool:
        """Whether nothing is left to run: every work item has a record of this attempt or a
        finished one of an earlier attempt, or the stopping rule has decided."""
        if self.stopper is not None and self.stopper.decision is not None:
            return True
        return all(i in self.recorded_now or self._finished(i) for i in self.indices)

    def _total(self) -> int:
        """The episodes this work directory owes: the run's (or shard's) items; a runner sharing
        a run through the queue, those it recorded."""
        return len(self.merged) if self.shared else len(self.items)

    def _finished(self, index: int) -> bool:
        record = self.merged.get(index)
        return record is not None and (self.keep_errors or record.outcome != "error")

    def _tallies(self) -> dict[str, int]:
        counts = count_outcomes(self.merged.values())
        tallies = {"episodes_done": len(self.merged), "successes": counts["success"], "errors": counts["error"]}
        return {**tallies, "episodes_total": len(self.merged)} if self.shared else tallies

    def _episode_end(self, writer: RecordWriter, record: EpisodeRecord) -> None:
        # A record on disk is also counted in memory (run_result.json, status.json): a stop
        # signal waits until both are done, then takes effect.
        armed, self.armed = self.armed, False
        try:
            if self.claims is not None and not self.claims.finish(record.episode_index):
                print(f"arena run-one: run {self.run.name}: episode {record.episode_index} was finished by another "
                      "runner first (this runner's lease had lapsed): its record here is dropped", file=sys.stderr)
                return
            writer.write(record)
            self.recorded_now.add(record.episode_index)
            current = self.merged.get(record.episode_index)
            self.merged[record.episode_index] = merge_records([r for r in (current, record) if r is not None])[0]
            if self.stopper is not None:
                self.stopper.feed(self._stopper_view())
            self.last_progress = time.monotonic()
            self.status.progress(**self._tallies())
            if self.sinks is not None:  # never waits (arena.sinks)
                self.sinks.episode_finished(self.run.name, json.loads(record.to_json()))
        finally:
            self.armed = armed
        if armed and self.cancel_requested:
            self.armed = False
            raise RunCancelled("a stop signal arrived while an episode's record was written")

    def _progress(self, summary: RolloutSummary) -> None:
        now = time.monotonic()
        if now - self.last_progress >= PROGRESS_INTERVAL_S:
            self.last_progress = now
            self.status.progress()

    # -- the end ---------------------------------------------------------------------------
    def _finish(self, state: str, error: str | None, started_at: str) -> int:
        stop = stop_record(self.stopper, self._stopper_view())
        records = [r for r in self.merged.values() if stop is None or r.episode_index < stop["episodes_used"]]
        result = write_run_result(
            self.work_dir,
            run=self.run.name,
            state=state,
            error=error,
            server=self.server,
            records=records,
            episodes_total=self._total(),
            started_at=started_at,
            shard=self.shard,
            machine=machine_info(),
            warnings=self.warnings,
            model=model_record(self.run, self.task, self.server, self.metadata),
            metric_bounds=self._metric_bounds(),
        )
        if stop is not None:  # the rule's decision, and the episodes past it (kept, not counted)
            result["stop"] = stop
            write_json_atomic(self.work_dir / RUN_RESULT_FILE, result)
            print(f"arena run-one: run {self.run.name}: stopped early: {stop['reason']}", file=sys.stderr)
        tallies = self._tallies()
        if stop is not None:  # complete at the stopping index: the progress line and arena status say so
            used = stop["episodes_used"]
            errors = len(stop.get("error_episodes") or ())
            tallies = {"episodes_done": used, "episodes_total": used, "successes": stop["successes"], "errors": errors}
        self.status.update(state=state, error=error, warnings=result["warnings"], stop=stop, **tallies)
        if self.sinks is not None:
            self.sinks.run_finished(self.run.name, result)
        counts = result["counts"]
        k, n = counts["success"], counts["success"] + counts["failure"] + counts["timeout"]
        rate = "n/a" if n == 0 else f"{k}/{n} = {k / n:.1%}"
        where = f" shard {self.shard[0]}/{self.shard[1]}" if self.shard else ""
        print(
            f"arena run-one: run {self.run.name}{where}: {state}; success {rate}; errors {counts['error']}"
            + (f"; {error}" if error else ""),
            file=sys.stderr,
        )
        for warning in result["warnings"]:
            print(f"arena run-one: run {self.run.name}{where}: warning: {warning}", file=sys.stderr)
        return EXIT_OK if state == "completed" and counts["error"] == 0 else EXIT_RUN

    def _metric_bounds(self) -> dict[str, tuple[float, float]] | None:
        """The environment's declared episode-metric bounds (``None`` when it declares none or
        its declaration is malformed: the intervals then fall back to Student's t)."""
        from arena.outputs.metrics import declared_bounds

        try:
            return declared_bounds(self.run.environment_cls, self.run.environment) or None
        except Exception as exc:  # a malformed declaration must not lose the run's result
            print(f"arena run-one: run {self.run.name}: ignoring episode_metric_bounds: {exc}", file=sys.stderr)
            return None

    # -- SIGTERM, SIGUSR1, SIGINT ------------------------------------------------------------
    def _install_stop_handlers(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum: int, frame: Any) -> None:
            self.cancel_requested = True
            if signum == signal.SIGUSR1:
                self.time_limit = True
            if self.armed:
                self.armed = False
                raise RunCancelled(f"signal {signum}")

        # SIGINT (Ctrl-C reaches the runner too) is handled alike, unless it is ignored.
        interrupt = signal.getsignal(signal.SIGINT)
        on_interrupt = interrupt if interrupt == signal.SIG_IGN else signal.signal(signal.SIGINT, handler)
        return signal.signal(signal.SIGTERM, handler), signal.signal(signal.SIGUSR1, handler), on_interrupt

    def _restore_stop_handlers(self, previous: Any) -> None:
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous[0])
            signal.signal(signal.SIGUSR1, previous[1])
            signal.signal(signal.SIGINT, previous[2])


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
