"""The ``slurm`` launch backend: one sbatch job per run (a job array for a sharded run) and a
final aggregation job.

``submit`` writes the scripts to ``<output_dir>/slurm/``, submits each with ``sbatch
--parsable``, then ``collect.sbatch`` with ``--dependency=afterany:<every run job>``, records
the job ids in ``submission.json`` and returns (``arena run`` exits) unless ``--wait``.
``status``/``cancel``/``collect`` work later from the output directory alone.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.errors import ConfigError, LaunchError
from arena.launch.base import LaunchBackend, Submission
from arena.rollout.records import StatusWriter

from arena_slurm import jobstate, scheduler
from arena_slurm.options import SlurmOptions
from arena_slurm.render import render_collect_script, render_run_script, server_exposure

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

    def __init__(self, options: SlurmOptions) -> None:
        super().__init__(options)
        self.options: SlurmOptions = options

    # -- planning ------------------------------------------------------------------------------
    def check(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> None:
        """Refuse what this backend cannot run, before anything is submitted.

        Raises:
            ConfigError: a server task has neither a usable image nor a local_command; a
                hetjob run is sharded (Slurm has no het-job arrays); a run is sharded into
                more shards than it has episodes; a hetjob server would bind loopback.
        """
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
            unknown = sorted(set(self.options.shards) - set(experiment.runs))
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

    def scripts(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> dict[str, str]:
        """``{file name: script}``: one ``<run>.sbatch`` per run and ``collect.sbatch``."""
        output_dir = Path(output_dir).absolute()
        if any(ch.isspace() for ch in str(output_dir)):
            raise ConfigError(f"the output directory {output_dir} contains whitespace, which #SBATCH --output cannot hold")
        texts = {
            f"{run}.sbatch": render_run_script(experiment, run, servers.get(run), self.options, output_dir)
            for run in experiment.runs
        }
        texts["collect.sbatch"] = render_collect_script(experiment, self.options, output_dir)
        return texts

    def exposures(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
        found = {run: server_exposure(experiment, run, plan, self.options) for run, plan in servers.items()}
        return {run: exposure for run, exposure in found.items() if exposure is not None}

    def plan(self, experiment: ResolvedExperiment, servers: dict[str, ServerPlan], output_dir: Path) -> str:
        self.check(experiment, servers)
        parts = []
        for name, text in self.scripts(experiment, servers, output_dir).items():
            parts.append(f"# ===== {SCRIPTS_DIR}/{name} =====\n{text}")
        return "\n".join(parts)

    # -- submission ----------------------------------------------------------------------------
    def submit(
        self,
        experiment: ResolvedExperiment,
        servers: dict[str, ServerPlan],
        output_dir: Path,
        *,
        wait: bool = False,
        console: Console | None = None,
    ) -> Submission:
        self.check(experiment, servers)
        output_dir = Path(output_dir).absolute()
        scripts = self.scripts(experiment, servers, output_dir)
        script_dir = output_dir / SCRIPTS_DIR
        script_dir.mkdir(parents=True, exist_ok=True)
        for name, text in scripts.items():
            (script_dir / name).write_text(text)
        shards = {run: self.options.shards_of(run) for run in experiment.runs}
        submission = Submission(
            backend=self.name,
            experiment=experiment.name,
            output_dir=str(output_dir),
            extra={"layout": self.options.layout, "shards": shards, "array_jobs": {}, "collect_job": None},
        )
        submission.save()
        for run in experiment.runs:
            n = shards[run]
            for k in range(n):  # "pending" first: the job may start before sbatch returns
                work_dir = output_dir / run if n == 1 else output_dir / run / "shards" / str(k)
                StatusWriter(work_dir / "status.json", run=run, shard=None if n == 1 else [k, n], pid=None).write(
                    state="pending", error=None
                )
            try:
                job = scheduler.sbatch(script_dir / f"{run}.sbatch")
            except LaunchError as exc:
                submitted = ", ".join(f"{r} ({ids['0'].split('_')[0]})" for r, ids in submission.ids.items())
                hint = f"; already submitted: {submitted} (stop them with `arena cancel {output_dir}`)" if submitted else ""
                raise LaunchError(f"{exc}{hint}") from None
            submission.ids[run] = {"0": job} if n == 1 else {str(k): f"{job}_{k}" for k in range(n)}
            if n > 1:
                submission.extra["array_jobs"][run] = job
            submission.save()
            _say(console, f"run [bold]{run}[/]: Slurm job {job}" + (f" (array of {n} shards)" if n > 1 else ""))
        run_jobs = sorted({scheduler.base_id(j) for ids in submission.ids.values() for j in ids.values()}, key=int)
        collect = scheduler.sbatch(
            script_dir / "collect.sbatch", f"--dependency=afterany:{':'.join(run_jobs)}", "--kill-on-invalid-dep=no"
        )
        submission.extra["collect_job"] = collect
        submission.save()
        _say(console, f"aggregation: Slurm job {collect} (after every run job ends)")
        if wait:
            self.wait(submission, console)
        return submission

    def wait(self, submission: Submission, console: Console | None = None) -> None:
        """Poll until every run job and the aggregation job have left the queue.

        Ctrl-C stops waiting only: the jobs keep running (``arena cancel`` stops them).
        """
        refs = [j for ids in submission.ids.values() for j in ids.values()]
        if submission.extra.get("collect_job"):
            refs.append(submission.extra["collect_job"])
        last = None
        try:
            while True:
                live = scheduler.squeue(refs)
                if not live:
                    return
                summary = _summary(live)
                if summary != last:
                    _say(console, f"waiting for Slurm: {summary}")
                    last = summary
                time.sleep(self.options.poll_interval_s)
        except KeyboardInterrupt:
            _say(console, f"[yellow]stopped waiting; the jobs keep running (stop them: arena cancel {submission.output_dir})[/]")
            raise

    # -- later commands ------------------------------------------------------------------------
    def status(self, submission: Submission) -> dict[str, dict[str, Any]]:
        """Per run: state (shards merged), episode counts from the records, job ids and errors."""
        from arena.results.aggregate import summarize_run

        output_dir = Path(submission.output_dir)
        states, live = jobstate.job_states(submission)
        manifest = _manifest(output_dir)
        report: dict[str, dict[str, Any]] = {}
        for run in submission.ids:
            mine = {p: s for p, s in states.items() if p.run == run}
            summary = summarize_run(output_dir, run, manifest.get(run))
            counts = summary["counts"]
            report[run] = {
                "state": _merge_states([s for s, _ in mine.values()]),
                "episodes_done": summary["episodes_recorded"],
                "episodes_total": summary["episodes_total"],
                "successes": counts["success"],
                "errors": counts["error"],
                "error": "; ".join(dict.fromkeys(e for _, e in mine.values() if e)) or None,
                "slurm_jobs": {("0" if p.shard is None else str(p.shard)): p.job for p in mine},
                "slurm_states": {p.job: live[p.job] for p in mine if p.job in live} if live is not None else None,
            }
        return report

    def cancel(self, submission: Submission) -> None:
        """``scancel`` every run job; the aggregation job still runs and reports.

        Runs that already finished keep their results; a running job writes ``cancelled``
        itself; jobs that never started, or left no final state, are finalized here after
        they leave the queue (at most :data:`CANCEL_SETTLE_S` seconds).
        """
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


def _merge_states(states: list[str]) -> str:
    """One state for a run from its shards' states: any live one first, then the worst."""
    for state in ("running", "starting_server", "pending", "failed", "cancelled", "completed"):
        if state in states:
            if state == "pending" and any(s in jobstate.FINAL for s in states):
                return "running"  # some shards done, others queued
            return state
    return "pending"


def _summary(live: dict[str, str]) -> str:
    counts: dict[str, int] = {}
    for state in live.values():
        counts[state.lower()] = counts.get(state.lower(), 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))


def _manifest(output_dir: Path) -> dict[str, Any]:
    from arena.rollout.records import read_json

    data = read_json(output_dir / "manifest.json")
    return (data or {}).get("runs", {}) if isinstance(data, dict) else {}


def _say(console: Console | None, text: str) -> None:
    if console is not None:
        console.print(text, highlight=False)
