"""The ``slurm`` launch backend: one sbatch job per server group (a job array for sharded runs)
and a final aggregation job.

A server group is the runs that share one policy server (the same server task, as the local
backend decides: :func:`arena_slurm.render.groups`); a run without a server arena starts is a
group of its own. A group's job starts the server once per node (array element) and runs the
runner of each of its runs beside it, one after the other; each run keeps its own work
directory, states and job id entry (the group's job) in ``submission.json``.

``submit`` writes the scripts to ``<output_dir>/slurm/``, submits each with ``sbatch
--parsable``, then ``collect.sbatch`` with ``--dependency=afterany:<every run job>``, records
the job ids in ``submission.json`` and returns (``arena run`` exits) unless ``--wait``.
``status``/``cancel``/``collect`` work later from the output directory alone.

With ``work: queue`` (the default) ``submit`` first loads the runs' episodes into
``OUTPUT_DIR/queue.sqlite`` (:mod:`arena.launch.queueing`) and every job of a run claims them:
a job killed mid-run leaves its leased episodes to the run's other jobs once the lease
(``lease_s``) lapses, and the last runner to finish marks the run ``completed`` from the
records. With ``work: static`` shard K runs its fixed share and a lost one waits for a resume.
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from arena.errors import ConfigError, LaunchError
from arena.launch.base import LaunchBackend, Poll, Resume, Submission
from arena.launch.planning import missing_image, started_task
from arena.launch.wording import fold_by_run, some_runs
from arena.outputs.layout import MANIFEST_FILE, RUN_RESULT_FILE, STATUS_FILE, work_dir as work_directory
from arena.outputs.records import FINAL_STATES, StatusWriter, read_json, write_run_result

from arena_slurm import jobstate, scheduler
from arena_slurm.options import SlurmOptions
from arena_slurm.render import (
    groups,
    node_spec_file,
    render_collect_script,
    render_node_spec,
    render_run_script,
    run_context,
    server_exposure,
)

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.exposure import Exposure
    from arena.launch.planning import ServerPlan

SCRIPTS_DIR = "slurm"
#: Seconds ``arena cancel`` waits for cancelled jobs to leave the queue before finalizing them.
CANCEL_SETTLE_S = 90.0


class SlurmBackend(LaunchBackend):
    """Runs on a Slurm cluster; ``arena run`` returns after submission unless ``--wait``."""

    name = "slurm"
    Config = SlurmOptions
    can_resume = True
    options: SlurmOptions  # set by LaunchBackend.__init__ from Config

    # -- planning ------------------------------------------------------------------------------
    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse what this backend cannot run, before anything is submitted.

        Raises:
            ConfigError: a server task whose plugin knows of no pullable image has none while
                ``containers`` is on; a server task has neither a usable image nor a local_command; a
                hetjob run is sharded (Slurm has no het-job arrays); a run is sharded into
                more shards than it has episodes; a hetjob server would bind loopback; a sharded
                run has ``rollout_limit.stop_when`` (the rule needs all episodes in one process).
        """
        missing = self._missing_images(experiment, servers)
        if missing:
            raise missing[0]
        self._check_layout(experiment, servers)

    def _missing_images(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> list[ConfigError]:
        """The server images the user still has to name (``runs.<run>.server.image``)."""
        errors = []
        for run, plan in servers.items():
            task = plan.task
            if task is not None and self.options.containers and not task.image and task.image_hint:
                error = missing_image(experiment, run, task)
                errors.append(ConfigError(
                    f"{error.message}; or run its local_command on the node with launch.slurm.containers=false",
                    file=experiment.source, run=run, key=error.key,
                ))
        return errors

    def _check_layout(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        for run, plan in servers.items():
            task = plan.task
            if task is None:
                continue
            server_exposure(experiment, run, plan, self.options)
            if not (task.image and self.options.containers) and not task.local_command:
                why = "launch.slurm.containers is false" if task.image else "it has no image"
                raise ConfigError(
                    f"server task '{task.name}' cannot start on Slurm: {why} and it has no local_command",
                    file=experiment.source,
                    run=run,
                    key="server",
                )
            if self.options.layout == "hetjob" and self.options.shards_of(run) > 1:
                raise ConfigError(
                    "launch.slurm.layout=hetjob cannot be combined with shards > 1 "
                    "(Slurm does not run heterogeneous jobs as job arrays)",
                    file=experiment.source,
                    run=run,
                    key="launch.slurm.shards",
                )
        if isinstance(self.options.shards, dict):
            unknown = sorted(set(self.options.shards) - set(experiment.all_runs))  # a resume launches some
            if unknown:
                raise ConfigError(
                    f"launch.slurm.shards names unknown run(s): {', '.join(unknown)}",
                    file=experiment.source,
                    key="launch.slurm.shards",
                )
        for name, run in experiment.runs.items():
            shards = self.options.shards_of(name)
            episodes = run.rollout_limit.num_episodes
            if shards > 1 and isinstance(episodes, int) and shards > episodes:
                raise ConfigError(
                    f"{shards} shards for {episodes} episode(s): every shard needs at least one episode",
                    file=experiment.source,
                    run=name,
                    key="launch.slurm.shards",
                )
            if shards > 1 and getattr(run.rollout_limit, "stop_when", None) is not None:
                raise ConfigError(
                    f"rollout_limit.stop_when cannot stop a run split into {shards} shards: each shard runs in its "
                    "own arena run-one and sees only its own episodes, while the rule needs them all in seed order; "
                    "run it unsharded (launch.slurm.shards: 1) or drop stop_when",
                    file=experiment.source,
                    run=name,
                    key="launch.slurm.shards",
                )

    def scripts(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> dict[str, str]:
        """``{file name: text}``: per server group (named by its first run) its ``<run>.sbatch``
        and the spec its node supervisor runs (``<run>.node.json``, :mod:`arena.launch.node`),
        and ``collect.sbatch``."""
        output_dir = Path(output_dir).absolute()
        if any(ch.isspace() for ch in str(output_dir)):
            raise ConfigError(f"the output directory {output_dir} contains whitespace, which #SBATCH --output cannot hold")
        if "%" in str(output_dir):  # sbatch(1) "filename pattern": %j, %x, ... would be expanded
            raise ConfigError(
                f"the output directory {output_dir} contains '%', which #SBATCH --output expands (%j: the job id, "
                "%x: its name, ...): choose a directory without '%'"
            )
        texts = {}
        for group in groups(experiment, servers, self.options):
            run, plan, others = group[0], servers.get(group[0]), group[1:]
            texts[f"{run}.sbatch"] = render_run_script(experiment, run, plan, self.options, output_dir, others)
            texts[node_spec_file(run)] = render_node_spec(experiment, run, plan, self.options, output_dir, others)
        texts["collect.sbatch"] = render_collect_script(experiment, self.options, output_dir)
        return texts

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        found = {run: server_exposure(experiment, run, plan, self.options) for run, plan in servers.items()}
        return {run: exposure for run, exposure in found.items() if exposure is not None}

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        """Write the scripts ``submit`` would submit to a new temporary directory (nothing is
        submitted, the output directory is not created) and return a summary naming them: per
        job what it asks Slurm for and what it runs, then the server images still to be named
        (``submit`` refuses those runs; the scripts show them with their ``local_command``)."""
        import tempfile

        self._check_layout(experiment, servers)
        missing = self._missing_images(experiment, servers)  # listed below: a dry-run shows the rest too
        scripts = self.scripts(experiment, servers, output_dir)
        where = Path(tempfile.mkdtemp(prefix=f"arena-dry-run-{experiment.name}-slurm-"))
        for name, text in scripts.items():
            (where / name).write_text(text)
        from arena.launch.wording import run_names

        found = groups(experiment, servers, self.options)
        lines = [
            f"# slurm: {len(found)} run job(s) for {len(experiment.runs)} run(s) and an aggregation job, not submitted; "
            f"the scripts are in {where}/",
        ]
        width = max(len(name) for name in scripts)
        for group in found:
            run = group[0]
            context = run_context(experiment, run, servers.get(run), self.options, Path(output_dir).absolute(), group[1:])
            request = " | ".join(" ".join(_request(c)) for c in context["components"])
            array = f" --array={context['array']}" if context["array"] else ""
            shared = f"; one server for {run_names(group)}" if len(group) > 1 else ""
            lines.append(f"  {where / (run + '.sbatch')!s:<{len(str(where)) + width + 1}}  {context['layout_note']}: {request}{array}{shared}")
        lines.append(f"  {where / 'collect.sbatch'!s:<{len(str(where)) + width + 1}}  arena collect {output_dir}, after every run job ends")
        for group in found:
            name = node_spec_file(group[0])
            whose = f"run {group[0]}'s" if len(group) == 1 else f"the {len(group)} runs' ({group[0]} … {group[-1]})"
            lines.append(f"  {where / name!s:<{len(str(where)) + width + 1}}  what {whose} `arena node` supervises")
        started = sum(self.options.shards_of(g[0]) for g in found if started_task(servers.get(g[0])) is not None)
        lines.append(f"# policy servers started: {started} (one per job, or per array element of a sharded job)")
        lines.append(f"  (read one: less {where / next(iter(experiment.runs))}.sbatch)")
        if self.options.runner_image:
            from arena.launch import runner_image

            lacking = runner_image.notes(experiment, "launch.slurm.runner_image")
            if lacking:
                lines.append("# runs launch.slurm.runner_image cannot run, if it is built from docker/runner.Dockerfile:")
                lines += [f"#   {line}" for line in lacking]
        if missing:
            lines.append("# to set before submitting (submitting refuses these runs):")
            # one line per server task, not per run (a LIBERO suite is 40 runs)
            for runs, message in fold_by_run((error.run, error.message) for error in missing):
                lines.append(f"#   run(s) {some_runs(runs)}: {message}")
        return "\n".join(lines)

    # -- submission ----------------------------------------------------------------------------
    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool = False,
        console: Console | None = None,
        resume: Resume | None = None,
    ) -> Submission:
        """Submit one job (an array for a sharded run) per run, then the aggregation job.

        ``resume``: extend the earlier submission of ``output_dir``: each run of ``experiment``
        is submitted again with ``arena run-one --resume`` (passed as arguments of the batch
        script), a sharded run as an array of only the shards that still have unfinished
        work items (``--array=1,3``); the other shards keep their earlier jobs and results.
        """
        self.check(experiment, servers)
        output_dir = Path(output_dir).absolute()
        scripts = self.scripts(experiment, servers, output_dir)
        script_dir = output_dir / SCRIPTS_DIR
        script_dir.mkdir(parents=True, exist_ok=True)
        for name, text in scripts.items():
            (script_dir / name).write_text(text)
        shards = {run: self.options.shards_of(run) for run in experiment.runs}
        queue = self.options.work == "queue"
        if queue:  # before any job starts: its runners claim these (a resume: the items left)
            from arena.launch.queueing import load_runs

            load_runs(output_dir, experiment, list(experiment.runs), resume)
        found = groups(experiment, servers, self.options)
        if resume is None:
            submission = Submission(
                backend=self.name,
                experiment=experiment.name,
                output_dir=str(output_dir),
                extra={"layout": self.options.layout, "shards": shards, "work": self.options.work, "array_jobs": {},
                       "collect_job": None},
            )
        else:
            submission = _resumed(Submission.load(output_dir), shards)
        submission.save()
        script_args = resume.run_one_flags() if resume is not None else []
        done: list[str] = []
        new_jobs: list[str] = []
        for group in found:
            run = group[0]  # the job's name, script and comment are its first run's
            n = shards[run]
            # with the queue every job may claim any episode left: a resume submits them all
            todo = [k for k in range(n) if resume is None or n == 1 or queue or any(resume.shard_has_work(r, k, n) for r in group)]
            for member in group:
                for k in todo:  # "pending" first: the job may start before sbatch returns
                    work_dir = work_directory(output_dir, member, None if n == 1 else k)
                    StatusWriter(work_dir / STATUS_FILE, run=member, shard=None if n == 1 else [k, n], pid=None).write(
                        state="pending", error=None
                    )
                    (work_dir / RUN_RESULT_FILE).unlink(missing_ok=True)  # an earlier attempt's final result
            array = []
            if n > 1 and len(todo) < n:  # resume: only the shards with work left (overrides #SBATCH --array)
                limit = f"%{self.options.array_parallelism}" if self.options.array_parallelism else ""
                array = [f"--array={','.join(map(str, todo))}{limit}"]
            # Noted before sbatch: if arena dies while sbatch runs, later commands find the job by
            # its comment (_adopt_submitted) instead of losing it.
            token = submission.extra.setdefault("token", secrets.token_hex(8))
            for member in group:
                submission.extra.setdefault("submitting", {})[member] = todo
                if len(group) > 1:  # found by its group's comment (_adopt_submitted)
                    submission.extra.setdefault("job_of", {})[member] = run
            submission.save()
            try:
                job = scheduler.sbatch(
                    script_dir / f"{run}.sbatch", *array, f"--comment={_comment(token, run)}", script_args=script_args
                )
            except LaunchError as exc:  # recorded failed (not pending forever), then said
                for member in group:
                    submission.extra["submitting"].pop(member, None)
                error = jobstate.refusal(run, str(exc))
                for member in group:
                    _record_refused(submission, member, todo, n, error)
                raise LaunchError(f"{error}{_already_submitted(submission, done, output_dir)}") from None
            for member in group:
                submission.extra.get("refused", {}).pop(member, None)  # a resume submitted it after all
                _record_job(submission, member, n, todo, job)
            done.append(run)
            new_jobs.append(job)
            what = f" (array of {n} shards)" if n > 1 and len(todo) == n else f" (shards {', '.join(map(str, todo))} of {n})" if n > 1 else ""
            shared = f", one policy server for {', '.join(group)}" if len(group) > 1 else ""
            who = f"run [bold]{escape(run)}[/]" if len(group) == 1 else f"runs [bold]{escape(', '.join(group))}[/]"
            _say(console, f"{who}: " + escape(f"Slurm job {job}{what}{shared}" + (" resuming" if resume is not None else "")))
        collect = scheduler.sbatch(
            script_dir / "collect.sbatch",
            f"--dependency=afterany:{':'.join(sorted(new_jobs, key=int))}",
            "--kill-on-invalid-dep=no",
        )
        submission.extra["collect_job"] = collect
        submission.save()
        _say(console, f"aggregation: Slurm job {collect} (after every run job ends)")
        if wait:
            self.wait(submission, console)
        return submission

    def poll(self, submission: Submission, console: Console | None = None) -> Poll:
        """One ``squeue`` of every run job and the aggregation job (:meth:`LaunchBackend.wait`
        loops until they have left the queue).

        A job pending for a reason that cannot clear (:data:`arena_slurm.jobstate.NEVER_STARTS`,
        e.g. more CPUs than any node of the partition has) is cancelled and its run failed,
        naming the option to change; waiting goes on for the others.
        """
        refs = [j for ids in submission.ids.values() for j in ids.values()]
        if submission.extra.get("collect_job"):
            refs.append(submission.extra["collect_job"])
        live = scheduler.squeue(refs)
        if not live:
            return Poll(done=True)
        notes: list[str] = []
        if any(j.state in jobstate.QUEUED and j.reason in jobstate.NEVER_STARTS for j in live.values()):
            states, _ = jobstate.job_states(submission)
            for piece in jobstate.fail_never_starting(submission, states):
                notes.append(f"[red]run {escape(piece.run)}[/]: {escape(str(states[piece].error))}")
        return Poll(done=False, summary=escape(f"waiting for Slurm: {_summary(live)}"), notes=tuple(notes))

    # -- later commands ------------------------------------------------------------------------
    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per run: state (shards merged), episode counts from the records, job ids and errors."""
        from arena.results.run_summary import summarize_run

        _adopt_submitted(submission)
        output_dir = Path(submission.output_dir)
        states, live = jobstate.job_states(submission)
        manifest = _manifest(output_dir)
        report: dict[str, dict[str, Any]] = {}
        for run, error in submission.extra.get("refused", {}).items():
            if run not in submission.ids:  # sbatch refused its job: no job to ask Slurm about
                summary = summarize_run(output_dir, run, manifest.get(run))
                report[run] = {
                    "state": "failed", "episodes_done": summary["episodes_recorded"], "episodes_total": summary["episodes_total"],
                    "successes": summary["counts"]["success"], "errors": summary["counts"]["error"], "error": error,
                    "pending_reason": None, "slurm_jobs": {}, "slurm_states": None,
                }
        for run in submission.ids:
            mine = {p: s for p, s in states.items() if p.run == run}
            summary = summarize_run(output_dir, run, manifest.get(run))
            counts = summary["counts"]
            report[run] = {
                "state": _merge_states([s.state for s in mine.values()]),
                "episodes_done": summary["episodes_recorded"],
                "episodes_total": summary["episodes_total"],
                "successes": counts["success"],
                "errors": counts["error"],
                "error": "; ".join(dict.fromkeys(s.error for s in mine.values() if s.error)) or None,
                "pending_reason": ", ".join(dict.fromkeys(s.pending_reason for s in mine.values() if s.pending_reason)) or None,
                "slurm_jobs": {("0" if p.shard is None else str(p.shard)): p.job for p in mine},
                "slurm_states": {p.job: live[p.job].state for p in mine if p.job in live} if live is not None else None,
            }
        return report

    def cancel(self, submission: Submission) -> None:
        """``scancel`` every run job; the aggregation job still runs and reports.

        Runs that already finished keep their results; a running job writes ``cancelled``
        itself; jobs that never started, or left no final state, are finalized here after
        they leave the queue (at most :data:`CANCEL_SETTLE_S` seconds).
        """
        _adopt_submitted(submission)
        refs = [j for ids in submission.ids.values() for j in ids.values()]
        submission.extra["cancel_requested_at"] = datetime.now(timezone.utc).isoformat()
        submission.save()
        scheduler.scancel(refs)
        deadline = time.monotonic() + CANCEL_SETTLE_S
        while scheduler.squeue(refs) and time.monotonic() < deadline:
            time.sleep(1.0)
        states, _ = jobstate.job_states(submission, require_squeue=True)
        jobstate.finalize(submission, states)

    def collect(self, submission: Submission) -> Path:
        """Finalize every ended job without a final result (failed runs stay failed, not missing).

        Without squeue (the directory copied off the cluster) it only rebuilds the report.
        """
        states, _ = jobstate.job_states(submission)
        jobstate.finalize(submission, states)
        return Path(submission.output_dir)



def _resumed(submission: Submission, shards: dict[str, int]) -> Submission:
    """The earlier submission, ready to take the resumed jobs: a cancel request of the earlier
    attempt moves into ``resumes`` (it must not make the new jobs count as cancelled)."""
    if submission.backend != "slurm":
        raise LaunchError(f"{submission.output_dir} was submitted with '{submission.backend}', not slurm")
    known = submission.extra.setdefault("shards", {})
    for run, n in shards.items():
        if int(known.get(run, n)) != n:
            raise LaunchError(f"run {run} was submitted as {known[run]} shard(s), the snapshot now says {n}")
        known[run] = n
    submission.extra.setdefault("array_jobs", {})
    entry = {"at": datetime.now(timezone.utc).isoformat(), "runs": sorted(shards)}
    if submission.extra.get("cancel_requested_at"):
        entry["after_cancel_at"] = submission.extra.pop("cancel_requested_at")
    submission.extra.setdefault("resumes", []).append(entry)
    return submission


def _comment(token: str, run: str) -> str:
    """The ``sbatch --comment`` that identifies ``run``'s job of one submission."""
    return f"arena:{token}:{run}"


def _record_job(submission: Submission, run: str, n: int, todo: list[int], job: str) -> None:
    """Note that ``job`` runs ``run`` (shards ``todo`` of ``n``) and save the submission."""
    if n == 1:
        submission.ids[run] = {"0": job}
    else:
        submission.ids.setdefault(run, {}).update({str(k): f"{job}_{k}" for k in todo})
        submission.extra["array_jobs"][run] = job
    submission.extra.get("submitting", {}).pop(run, None)
    submission.save()


def _adopt_submitted(submission: Submission) -> None:
    """Record the jobs of runs whose ``sbatch`` was still running when ``arena run`` died
    (SIGKILL): they are found in the queue by their ``--comment``; a run without one was
    not submitted and has nothing to stop."""
    pending = dict(submission.extra.get("submitting") or {})
    token = submission.extra.get("token")
    if not pending or not token:
        return
    job_of = submission.extra.get("job_of", {})  # a run of a server group: its group's job (named by its first run)
    found = scheduler.jobs_by_comment({_comment(token, job_of.get(run, run)) for run in pending})
    shards = submission.extra.get("shards", {})
    for run, todo in pending.items():
        job = found.get(_comment(token, job_of.get(run, run)))
        if job is not None:
            _record_job(submission, run, int(shards.get(run, 1)), list(todo), job)


def _record_refused(submission: Submission, run: str, todo: list[int], n: int, error: str) -> None:
    """Write ``failed`` with sbatch's refusal for the pieces of ``run`` it refused."""
    output_dir = Path(submission.output_dir)
    for k in todo:
        work_dir = work_directory(output_dir, run, None if n == 1 else k)
        shard = None if n == 1 else [k, n]
        StatusWriter(work_dir / STATUS_FILE, run=run, shard=shard, pid=None).write(state="failed", error=error)
        write_run_result(work_dir, run=run, state="failed", error=error, server=None, episodes_total=None,
                         shard=None if n == 1 else (k, n))
    submission.extra.setdefault("refused", {})[run] = error
    submission.save()


def _already_submitted(submission: Submission, runs: list[str], output_dir: Path) -> str:
    jobs = ", ".join(f"{run} ({scheduler.base_id(submission.extra['array_jobs'].get(run) or submission.ids[run]['0'])})" for run in runs)
    return f"; already submitted: {jobs} (stop them with `arena cancel {output_dir}`)" if jobs else ""


def _request(component: list[str]) -> list[str]:
    """What a job (or het component) asks Slurm for, from its #SBATCH lines."""
    keep = ("--partition", "--nodes", "--cpus-per-task", "--gpus-per-node", "--mem", "--time", "--account", "--qos")
    return [line for line in component if line.split("=", 1)[0] in keep]


def _merge_states(states: list[str]) -> str:
    """One state for a run from its shards' states: any live one first, then the worst."""
    for state in ("running", "starting_server", "pending", "failed", "cancelled", "completed"):
        if state in states:
            if state == "pending" and any(s in FINAL_STATES for s in states):
                return "running"  # some shards done, others queued
            return state
    return "pending"


def _summary(live: dict[str, scheduler.QueuedJob]) -> str:
    """``1 pending (Resources), 2 running``: jobs per state, a pending job's reason with it."""
    counts: dict[str, int] = {}
    for job in live.values():
        what = job.state.lower() + (f" ({job.reason})" if job.state in jobstate.QUEUED and job.reason else "")
        counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in sorted(counts.items()))


def _manifest(output_dir: Path) -> dict[str, Any]:
    data = read_json(output_dir / MANIFEST_FILE)
    return (data or {}).get("runs", {}) if isinstance(data, dict) else {}


def _say(console: Console | None, text: str) -> None:
    """Print rich markup ``text``; whatever it quotes from outside arena must be ``escape``d."""
    if console is not None:
        console.print(text, highlight=False)
