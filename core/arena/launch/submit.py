"""``arena run`` and the submission commands: the launch stage between plan and records.

``run_experiment`` resolves the output directory, writes the snapshot (``experiment.yaml``)
and ``manifest.json``, hands the runs to the backend named by ``launch.backend`` and, once
they are done (local, or ``--wait``), builds ``experiment_result.json`` and ``index.html``.
``status``/``cancel``/``collect`` dispatch to the backend named in ``submission.json``.

``resume_experiment`` (``arena run --resume OUTPUT_DIR``) first lets the backend bring in
whatever records its runs published (``collect``), then reloads the snapshot and hands a
backend that declares :attr:`~arena.launch.base.LaunchBackend.can_resume` only the runs whose
manifest work items lack a finished record, with a :class:`~arena.launch.base.Resume` naming
those items; each runner is started with ``--resume`` (and ``--keep-errors`` when ``error``
episodes are to be kept).
While a local submission runs, :class:`arena.outputs.progress.ProgressWatcher` shows progress
(bars on a terminal, periodic plain lines otherwise). ``provenance.json`` records what ran.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from arena.errors import ConfigError, LaunchError, short_repr
from arena.launch.base import SUBMISSION_FILE, Resume, Submission, Terminated, sigterm_interrupts
from arena.launch.planning import plan_servers
from arena.outputs.layout import EXPERIMENT_FILE, EXPERIMENT_RESULT_FILE, MANIFEST_FILE
from arena.outputs.records import LIVE_STATES, read_json, write_json_atomic

if TYPE_CHECKING:
    from rich.console import Console

    from arena.config import ResolvedExperiment
    from arena.launch.base import LaunchBackend

EXIT_OK, EXIT_CONFIG, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 2, 3, 130, 143


def make_backend(experiment: ResolvedExperiment, name: str | None = None) -> LaunchBackend:
    """Instantiate the launch backend ``name`` (default ``launch.backend``) with its options."""
    from arena.plugins import get_registry

    name = name or experiment.launch.backend
    registry = get_registry()
    if name not in registry.launch_backends:
        known = ", ".join(sorted(registry.launch_backends))
        raise ConfigError(f"unknown launch backend '{name}' (registered: {known})", file=experiment.source, key="launch.backend")
    return registry.launch_backends[name](experiment.launch.options(name))


def default_output_dir(experiment: ResolvedExperiment) -> Path:
    """``outputs/<experiment>/<timestamp>``: what ``--dry-run`` shows; :func:`claim_output_dir`
    adds ``-2``, ``-3``, … when another run took that name."""
    return Path("outputs") / experiment.name / datetime.now().strftime("%Y-%m-%d_%H-%M-%S")


def claim_output_dir(experiment: ResolvedExperiment, output_dir: Path | None) -> Path:
    """Create the output directory and claim it, so that no two ``arena run`` share one.

    Without ``output_dir``: a new ``outputs/<experiment>/<timestamp>[-N]``, created with an
    exclusive ``mkdir`` (two runs started in the same second get different directories).
    With one: it may exist if empty; it is claimed by creating its ``experiment.yaml``
    exclusively, so of two runs started at once on the same directory exactly one proceeds.

    Raises:
        ConfigError: ``output_dir`` is not empty, or another ``arena run`` claimed it first.
        OSError: the directory cannot be created (read-only, disk full, not a directory).
    """
    if output_dir is None:
        first = default_output_dir(experiment)
        first.parent.mkdir(parents=True, exist_ok=True)
        n = 1
        while True:
            out = first if n == 1 else first.with_name(f"{first.name}-{n}")
            try:
                out.mkdir()
                break
            except FileExistsError:
                n += 1
    else:
        out = Path(output_dir)
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--output-dir {out} is a file, not a directory; choose another --output-dir", file=experiment.source)
        out.mkdir(parents=True, exist_ok=True)
        if any(out.iterdir()):
            raise ConfigError(f"output directory {out} is not empty; choose another --output-dir", file=experiment.source)
    try:
        os.close(os.open(out / EXPERIMENT_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        raise ConfigError(
            f"output directory {out} was just taken by another arena run; choose another --output-dir",
            file=experiment.source,
        ) from None
    return out


def run_experiment(
    experiment: ResolvedExperiment,
    *,
    output_dir: Path | None = None,
    wait: bool = False,
    dry_run: bool = False,
    console: Console | None = None,
    runs: Sequence[str] | None = None,
) -> int:
    """Execute ``experiment`` with its launch backend; returns the exit code of ``arena run``.

    0 when every run completed without ``error`` episodes, 3 otherwise, 130 when interrupted
    (Ctrl-C), 143 when cancelled (SIGTERM: ``arena cancel``, a scheduler).

    ``runs`` (``arena run --run``): selectors of the runs to launch (names, the name of a run
    that expanded, globs: :mod:`arena.config.selection`); the others are not started. The
    snapshot and the manifest still hold every run, so ``arena run --resume OUTPUT_DIR`` runs
    the rest into the same directory; the result and the report list every run (those without
    records ``pending``, with no numbers), and the exit code judges the selected runs only.

    Raises:
        ConfigError: the experiment cannot run as configured, or a selector selects no run
            (exit code 2).
    """
    from arena.config import write_snapshot
    from arena.rollout.workitems import write_manifest

    selected = _selected(experiment, runs, experiment.source)
    launched = experiment if selected is None else experiment.only(selected)  # what the backend launches
    servers = plan_servers(launched)
    backend = make_backend(experiment)
    if output_dir is not None and re.search(r"[\x00-\x1f\x7f]", str(output_dir)):
        raise ConfigError(
            f"output directory {short_repr(str(output_dir))} holds a control character (a line break?); it enters "
            "job scripts and logs: choose another --output-dir",
            file=experiment.source,
        )
    if dry_run:
        out = Path(output_dir) if output_dir is not None else default_output_dir(experiment)
        _print_dry_run(launched, servers, backend, out, console)
        return EXIT_OK
    if output_dir is not None and Path(output_dir).is_dir() and any(Path(output_dir).iterdir()):
        raise _not_empty(Path(output_dir), experiment.source, selected)
    backend.check(launched, servers)
    out = claim_output_dir(experiment, output_dir)
    write_snapshot(experiment, out / EXPERIMENT_FILE)  # every run: a resume runs those not selected
    write_manifest(experiment, out)
    _write_provenance(out, experiment.source, _exposure_dicts(backend, launched, servers))
    which = f"{len(experiment.runs)} run(s)"
    if selected is not None:
        which = f"{len(selected)} of {len(experiment.runs)} run(s) selected ({', '.join(selected)})"
    _say(console, f"experiment [bold]{escape(experiment.name)}[/]: {escape(which)} -> {escape(str(out))}")
    return _tracked(
        experiment, out, lambda: _submit_and_report(launched, servers, backend, out, wait, console, None, selected),
        start=True, reports=backend.always_waits or wait,
    )


def _selected(experiment, runs: Sequence[str] | None, source: str | None) -> list[str] | None:
    """The names ``runs`` selects (:func:`arena.config.selection.select_runs`); ``None``: every run."""
    from arena.config.selection import select_runs

    return None if runs is None else select_runs(experiment.runs, list(runs), source=source)


def _tracked(experiment, out: Path, submit, *, start: bool, reports: bool) -> int:
    """Run ``submit()`` between the result sinks' experiment start (``start``) and end; the end
    is raised only when the experiment's result is built here (``reports``: the local backend
    or ``--wait``; not when interrupted). Sinks never change the exit code (:mod:`arena.sinks`)."""
    from arena.sinks import experiment_sinks, finish_experiment, read_provenance

    with experiment_sinks(experiment, out) as sinks:
        if start:
            sinks.experiment_started(experiment.snapshot(), read_provenance(out))
        code = submit()
        if reports and code in (EXIT_OK, EXIT_FAILED):
            finish_experiment(sinks, out)
    return code


def _not_empty(out: Path, source: str | None, selected: Sequence[str] | None = None) -> ConfigError:
    """The error for a non-empty ``--output-dir``; an earlier experiment's output gets the
    ``--resume`` that finishes it (of the ``selected`` runs, when ``--run`` chose some)."""
    message = f"output directory {out} is not empty; choose another --output-dir"
    if (out / EXPERIMENT_FILE).is_file() and (out / MANIFEST_FILE).is_file():
        runs = "".join(f" --run {name}" for name in selected or ())
        message += f", or finish the experiment it holds with: arena run --resume {out}{runs}"
    return ConfigError(message, file=source)


def _submit_and_report(
    experiment, servers, backend, out: Path, wait: bool, console, resume: Resume | None,
    selected: Sequence[str] | None = None,
) -> int:
    """Submit ``experiment``'s runs, wait for a local backend (or ``wait``), then the report;
    the exit code judges the ``selected`` runs (``None``: every run of the output)."""
    totals = {name: int(run.rollout_limit.num_episodes) for name, run in experiment.runs.items()}
    policies = {name: run.policy_type for name, run in experiment.runs.items()}
    try:
        with sigterm_interrupts(), _progress(backend, out, list(experiment.runs), console, totals, policies):
            kwargs = {"resume": resume} if resume is not None else {}
            submission = backend.submit(experiment, servers, out, wait=wait, console=console, **kwargs)
    except KeyboardInterrupt as stop:
        finished = _finish_report(out, console, selected)
        code = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
        if backend.always_waits and _all_completed(out, selected):
            # the stop came once every run had recorded all its work (e.g. while an environment
            # was closing): the runs' states follow their records, so the experiment is complete
            _say(console, escape("stopped after every episode was recorded: the experiment is complete"))
            return finished
        if not backend.always_waits and (out / SUBMISSION_FILE).exists():
            # only the waiting stopped: the jobs keep running, and a resume now would be refused
            _say(console, escape(
                f"stopped waiting; the {backend.name} jobs keep running: follow them with `arena status {out}`, "
                f"stop them with `arena cancel {out}`, report with `arena collect {out}` once they end"
            ))
            return code
        how = "cancelled" if isinstance(stop, Terminated) else "interrupted"
        _say(console, escape(f"{how}: finished episodes are kept; run the rest with: arena run --resume {out}"))
        return code
    if not backend.always_waits and not wait:
        _say(console, escape(f"submitted to {backend.name}; follow it with `arena status {out}`"))
        return EXIT_OK
    backend.collect(submission)
    code = _finish_report(out, console, selected)
    states = {r.get("state") for r in _read_result_states(out, selected)}
    if states & {"failed", "cancelled"}:
        again = "".join(f" --run {name}" for name in selected or ())
        _say(console, escape(f"the unfinished work items (and error episodes) run again with: arena run --resume {out}{again}"))
    if selected is not None:
        runs = _read_result_states_by_name(out)
        left = [name for name, r in runs.items() if name not in selected and not r.get("episodes_recorded")]
        if left:
            _say(console, escape(f"not run (no records yet): {', '.join(left)}; run them with: arena run --resume {out}"))
    return code


def _all_completed(out: Path, selected: Sequence[str] | None = None) -> bool:
    """Whether ``experiment_result.json`` lists runs (of ``selected``) and every one ``completed``."""
    runs = _read_result_states(out, selected)
    return bool(runs) and all(r.get("state") == "completed" for r in runs)


def _read_result_states(out: Path, selected: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The runs of ``experiment_result.json`` (only ``selected`` ones, when given; empty when it
    was not written)."""
    runs = _read_result_states_by_name(out)
    return [r for name, r in runs.items() if selected is None or name in selected]


def _read_result_states_by_name(out: Path) -> dict[str, dict[str, Any]]:
    data = read_json(out / EXPERIMENT_RESULT_FILE)
    runs = data.get("runs") if isinstance(data, dict) else None
    return {str(k): v for k, v in runs.items() if isinstance(v, dict)} if isinstance(runs, dict) else {}


def _progress(backend, out: Path, runs: list[str], console, totals: dict[str, int], policies: dict[str, str]):
    """Progress display for backends whose runs write status.json where this process sees it."""
    import contextlib

    from arena.outputs.progress import ProgressWatcher

    if console is None or not (backend.always_waits or getattr(backend, "shared_filesystem", False)):
        return contextlib.nullcontext()
    return ProgressWatcher(out, runs, console, totals=totals, policies=policies)


def _write_provenance(out: Path, source: str | None, servers: dict[str, Any]) -> None:
    from arena.results.provenance import write_provenance

    try:
        write_provenance(out, source, servers=servers)
    except OSError:  # provenance is a nicety; never block a run on it
        pass


def _exposure_dicts(backend, experiment, servers) -> dict[str, Any]:
    """Per run: who can reach the server arena starts for it (names, never a key)."""
    return {run: exposure.as_dict() for run, exposure in backend.exposures(experiment, servers).items()}


def remaining_work(output_dir: Path, keep_errors: bool = False) -> dict[str, list[int]]:
    """Per run of ``manifest.json``: the episode indices without a finished record.

    A record is finished unless its outcome is ``error`` (with ``keep_errors`` every record
    is). Records of shards count too. A run stopped early by ``rollout_limit.stop_when`` has
    only its error episodes before the stop left (none with ``keep_errors``): the episodes past
    the stop are never run, and the decision is kept (:class:`arena.outputs.stopping.SeedOrderStop`).

    Raises:
        ConfigError: the directory has no readable manifest.json.
    """
    from arena.results.run_summary import collect_run_records, read_stop

    manifest = read_json(output_dir / MANIFEST_FILE)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("runs"), dict):
        raise ConfigError(f"{output_dir} has no readable manifest.json: is it an arena output directory?")
    remaining: dict[str, list[int]] = {}
    for name, entry in manifest["runs"].items():
        indices = [int(item["episode_index"]) for item in entry.get("work_items", [])]
        stop = read_stop(output_dir / name)
        if stop is not None:
            indices = [i for i in indices if i < stop["episodes_used"]]
        done = {
            r.episode_index
            for r in collect_run_records(output_dir / name)
            if keep_errors or r.outcome != "error"
        }
        remaining[name] = [i for i in indices if i not in done]
    return remaining


def resume_experiment(
    output_dir: Path,
    *,
    keep_errors: bool = False,
    wait: bool = False,
    console: Console | None = None,
    jobs: int | None = None,
    runs: Sequence[str] | None = None,
) -> int:
    """``arena run --resume OUTPUT_DIR``: run what an interrupted experiment left undone.

    ``runs`` (``arena run --resume OUTPUT_DIR --run NAME``): only the unfinished work of the
    runs these selectors select (:mod:`arena.config.selection`); the others' files are left
    as they are, and the exit code judges the selected runs only.

    ``jobs`` replaces ``launch.local.jobs`` for this resume (how many runs at once; results do
    not depend on it); everything else comes from the snapshot.

    The backend of the earlier submission first collects what its runs published, so records
    that reached only the cluster's storage count as done. Then only runs with manifest work
    items lacking a finished record are handed to the backend of the snapshot
    (``launch.backend``), with a :class:`~arena.launch.base.Resume` naming those items. Returns
    the exit code like :func:`run_experiment`; 0 when nothing is left to do.

    Raises:
        ConfigError: ``output_dir`` is not an arena output directory, its submission is still
            running, its backend cannot resume, or a selector of ``runs`` selects no run.
        LaunchError: the earlier submission's scheduler cannot be asked what it holds.
    """
    from arena.config import load_experiment
    from arena.results.provenance import note_resume

    output_dir = Path(output_dir)
    snapshot = output_dir / EXPERIMENT_FILE
    if not snapshot.exists():
        raise ConfigError(f"{output_dir} has no experiment.yaml: is it an arena output directory?")
    overrides = [f"launch.local.jobs={int(jobs)}"] if jobs is not None else []
    experiment = load_experiment(snapshot, overrides, trust_snapshot=True)  # a snapshot arena wrote: its allow_imports hold
    selected = _selected(experiment, runs, str(snapshot))
    backend = make_backend(experiment)
    if not backend.can_resume:
        raise ConfigError(
            f"the '{backend.name}' launch backend cannot resume: run the experiment again into a new --output-dir",
            file=str(snapshot), key="launch.backend",
        )
    _refuse_if_running(output_dir)
    _collect_published(output_dir)
    manifest = read_json(output_dir / MANIFEST_FILE) or {}
    if manifest.get("experiment"):
        experiment = dataclasses.replace(experiment, name=str(manifest["experiment"]))
    remaining = remaining_work(output_dir, keep_errors)
    considered = list(experiment.runs) if selected is None else selected
    todo = {name: experiment.runs[name] for name in considered if remaining.get(name)}
    if not todo:
        of = "" if selected is None else f" of {', '.join(selected)}"
        _say(console, escape(f"nothing to resume in {output_dir}: every work item{of} has a finished record"))
        # ... but its bookkeeping may be unfinished (a stop signal after the last record): the
        # runs' states follow their records, then the result, the report and the sinks' end.
        return _tracked(
            experiment, output_dir, lambda: _finish_recorded(experiment, output_dir, console, selected),
            start=False, reports=True,
        )
    _complete_recorded(experiment, output_dir, [name for name in considered if name not in todo], console)
    left = sum(len(remaining[name]) for name in todo)
    _say(console, f"resuming [bold]{escape(experiment.name)}[/]: {left} episode(s) of {len(todo)} run(s): {escape(', '.join(todo))}")
    sub = experiment.only(todo)
    servers = plan_servers(sub)
    backend = make_backend(sub)
    backend.check(sub, servers)
    note_resume(output_dir, keep_errors)
    backend.prepare_resume(output_dir, list(todo))
    resume = Resume(remaining={name: remaining[name] for name in todo}, keep_errors=keep_errors)
    return _tracked(
        sub, output_dir, lambda: _submit_and_report(sub, servers, backend, output_dir, wait, console, resume, selected),
        start=False, reports=backend.always_waits or wait,
    )


def _complete_recorded(experiment, output_dir: Path, names, console: Console | None) -> bool:
    """Mark completed the runs ``names`` whose every work item is recorded but whose files say
    otherwise (:func:`arena.outputs.completion.complete_recorded_run`) and tell the sinks each
    such run's end; ``False`` when a file could not be written (said on the console)."""
    from arena.errors import unwritable
    from arena.outputs.completion import complete_recorded_run
    from arena.sinks import run_sinks

    for name in names:
        try:
            result = complete_recorded_run(output_dir, name)
        except OSError as exc:
            _say(console, f"[red]error:[/] {escape(unwritable(exc))}")
            return False
        if result is not None:
            _say(console, escape(f"run {name}: every work item is recorded: completed"))
            with run_sinks(experiment, output_dir, name) as sinks:
                sinks.run_finished(name, result)
    return True


def _finish_recorded(experiment, output_dir: Path, console: Console | None, selected: Sequence[str] | None = None) -> int:
    """A resume with nothing left to run: :func:`_complete_recorded` for every run (of
    ``selected``), then the result and the report; returns the exit code of :func:`_finish_report`."""
    if not _complete_recorded(experiment, output_dir, list(experiment.runs) if selected is None else selected, console):
        return EXIT_FAILED
    return _finish_report(output_dir, console, selected)


def _refuse_if_running(output_dir: Path) -> None:
    """Refuse to resume a submission that still runs: two runners would write one run's records.

    Raises:
        ConfigError: a run of the earlier submission is still pending or running.
    """
    try:
        submission = Submission.load(output_dir)
    except (ConfigError, LaunchError):  # no (readable) submission: nothing can be running it
        return
    if submission.backend == "local" or submission.extra.get("waits"):  # its submitting process runs it
        pid = submission.extra.get("pid")
        if pid and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
            except (ProcessLookupError, ValueError, PermissionError):
                return
            raise ConfigError(f"{output_dir} is still being run by process {pid}; stop it (arena cancel) before resuming")
        return
    live = {run: st.get("state") for run, st in _backend_for(submission).status(submission).items() if st.get("state") in LIVE_STATES}
    if live:
        which = ", ".join(f"{run} ({state})" for run, state in live.items())
        raise ConfigError(
            f"{output_dir} is still running on {submission.backend}: {which}; wait for it, or stop it with "
            f"`arena cancel {output_dir}`, before resuming"
        )


def _collect_published(output_dir: Path) -> None:
    """Let the earlier submission's backend bring in what its runs published (records kept on
    the cluster's storage count as done)."""
    try:
        submission = Submission.load(output_dir)
    except (ConfigError, LaunchError):
        return
    _backend_for(submission).collect(submission)


def _finish_report(out: Path, console: Console | None, selected: Sequence[str] | None = None) -> int:
    """Build the result and the report from every run's records on disk; the exit code judges
    the ``selected`` runs (``None``: all): 0 when each completed without error episodes."""
    from arena.results.aggregate import build_experiment_result
    from arena.results.report import write_report

    from arena.errors import unwritable

    result = build_experiment_result(out, write=False)
    if console is not None:
        _print_summary(result, console)
    judged = [r for name, r in result["runs"].items() if selected is None or name in selected]
    ok = all(r.get("state") == "completed" and not r.get("errors") for r in judged)
    try:
        write_json_atomic(out / EXPERIMENT_RESULT_FILE, result)
        report = write_report(out, result)
    except OSError as exc:  # disk full, read-only: the records are kept; `arena report` rebuilds
        _say(console, f"[red]error:[/] {escape(f'{unwritable(exc)} (the records are kept; `arena report {out}` rebuilds it)')}")
        return EXIT_FAILED
    _say(console, escape(f"report: {report}"))
    return EXIT_OK if ok else EXIT_FAILED


def _backend_for(submission: Submission) -> LaunchBackend:
    from arena.plugins import get_registry

    registry = get_registry()
    cls = registry.launch_backends.get(submission.backend)
    if cls is None:
        raise LaunchError(
            f"{submission.output_dir} was submitted with the '{submission.backend}' backend, which is not installed"
        )
    return cls(cls.Config())


def submission_status(output_dir: Path) -> dict[str, dict[str, Any]]:
    submission = Submission.load(output_dir)
    return _backend_for(submission).status(submission)


def cancel_submission(output_dir: Path) -> None:
    submission = Submission.load(output_dir)
    _backend_for(submission).cancel(submission)


def collect_submission(output_dir: Path) -> Path:
    from arena.results.report import write_report

    submission = Submission.load(output_dir)
    _backend_for(submission).collect(submission)
    report = write_report(output_dir)
    _finish_tracking(output_dir)
    return report


def _finish_tracking(output_dir: Path) -> None:
    """``arena collect``: the result sinks' experiment end (a cluster submission's result is built here)."""
    from arena.config import load_experiment
    from arena.sinks import experiment_sinks, finish_experiment

    try:
        experiment = load_experiment(output_dir / EXPERIMENT_FILE, trust_snapshot=True)
    except (ConfigError, OSError):  # the report is built; a snapshot arena cannot load has no sinks to tell
        return
    with experiment_sinks(experiment, output_dir) as sinks:
        finish_experiment(sinks, output_dir)


# -- printing ---------------------------------------------------------------------------------
def _say(console: Console | None, text: str) -> None:
    """Print rich markup ``text``; whatever it quotes from outside arena must be ``escape``d."""
    if console is not None:
        console.print(text, highlight=False)


def _print_dry_run(experiment, servers, backend, out: Path, console: Console | None) -> None:
    """A page a user reads: one line per run, one per distinct server task, then the backend's
    plan (every resolved value is ``arena validate FILE --list-overrides``)."""
    exposures = backend.exposures(experiment, servers)
    text = "\n".join(dry_run_summary(experiment, servers, backend.name, out, exposures)) + "\n"
    spec = backend.plan(experiment, servers, out)
    if console is None:
        print(text)
        print(spec)
    else:
        console.print(text, highlight=False, markup=False)
        console.print(spec, highlight=False, markup=False)


def dry_run_summary(experiment, servers, backend: str, out: Path, exposures: dict[str, Any] | None = None) -> list[str]:
    """The runs and their servers as ``--dry-run`` lists them, each server task once, with who
    can reach it (``exposures``: per run, :class:`arena.launch.exposure.Exposure`).

    Three or more consecutive runs that differ only in their task (a LIBERO suite's 40) share
    one line, then one short line per run naming its task; long lists of runs are shortened
    (``40 runs (spatial.0 … long.9)``)."""
    from arena.launch.wording import count, run_list, run_names

    runs = count(len(experiment.runs), "run")
    if len(experiment.all_runs) > len(experiment.runs):  # arena run --run: the others are not started
        runs = f"{len(experiment.runs)} of {count(len(experiment.all_runs), 'run')} selected"
    lines = [f"experiment {experiment.name}: {runs}, '{backend}' backend, output {out}"]
    users: dict[str, list[str]] = {}
    tasks = {}
    described: list[tuple[str, str, tuple[str, str]]] = []  # (run, its task, (environment, the rest))
    for name, run in experiment.runs.items():
        plan = servers.get(name)
        where = ""
        if plan is not None and plan.external:
            where = f"; its own server at {plan.host}:{plan.port}"
        elif plan is not None and plan.task is not None:
            where = f"; server {plan.task.name}"
            key = plan.task.identity()
            tasks.setdefault(key, plan.task)
            users.setdefault(key, []).append(name)
        limit = run.rollout_limit
        steps = f"each ≤ {limit.max_episode_steps} steps" if limit.max_episode_steps else "each up to the environment's step limit"
        rest = (
            f"with {run.policy_type}, {count(limit.num_episodes, 'episode')} ({steps}), "
            f"{count(run.environment_builder.num_envs, 'env')}, seed {run.environment_builder.seed}{where}"
        )
        described.append((name, run.environment.task_name() or "", (run.environment_type, rest)))
    for group in _consecutive(described):
        environment, rest = group[0][2]
        if len(group) < 3:
            lines += [f"  run {name}: {environment}{' ' + task if task else ''} {rest}" for name, task, _ in group]
            continue
        lines.append(f"  {run_list([g[0] for g in group])}: {environment} {rest}")
        width = max(len(g[0]) for g in group)
        lines += [f"    {name:<{width}}  {task}".rstrip() for name, task, _ in group]
    for key, task in tasks.items():
        r = task.resources
        need = ", ".join(p for p in (
            f"{r.cpu} CPU" if r.cpu else "", f"{r.gpu} GPU" if r.gpu else "",
            f"{r.memory:g} GiB" if r.memory else "", f"{r.storage:g} GiB disk" if r.storage else "",
        ) if p)
        lines.append(
            f"  server {task.name} for {run_names(users[key])}: image {task.image or '(none)'}, port {task.port}, "
            f"readiness {task.readiness}, startup timeout {task.startup_timeout_s:g} s" + (f", {need}" if need else "")
        )
        for exposure in dict.fromkeys(exposures[run].describe() for run in users[key] if run in (exposures or {})):
            lines.append(f"    {exposure}")
    lines.append(f"  (every resolved value: arena validate {experiment.source or 'EXPERIMENT'} --list-overrides)")
    return lines


def _consecutive(described: list[tuple[str, str, Any]]) -> list[list[tuple[str, str, Any]]]:
    """Consecutive runs that differ only in name and task, as groups (in order)."""
    groups: list[list[tuple[str, str, Any]]] = []
    for item in described:
        if groups and groups[-1][0][2] == item[2]:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _stop_words(stop: dict[str, Any]) -> str:
    """``"above 80%"`` / ``"below 80%"`` / ``"within ±5 points"``: a stop's decision in words."""
    rule = stop.get("rule") or {}
    if stop.get("decision") in ("above", "below") and rule.get("threshold") is not None:
        return f"{stop['decision']} {100 * rule['threshold']:g}%"
    if stop.get("decision") == "half_width" and rule.get("half_width") is not None:
        return f"known within ±{100 * rule['half_width']:g} points"
    return str(stop.get("decision"))


def _print_summary(result: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    table = Table("run", "state", "success", "rate", "95% CI", "failure", "timeout", "error", "note")
    for name, r in result["runs"].items():
        rate = r.get("success_rate")
        ci = r.get("ci95") if r.get("n") else None  # no episode: no interval (not 0-100 %)
        stop = r.get("stop") if isinstance(r.get("stop"), dict) else None
        note = r.get("note", r.get("partial_note"))  # with why its episodes errored (results written before: partial_note)
        notes = [f"[{'red' if r.get('error_note') else 'yellow'}]{escape(note)}[/]"] if note else []
        if stop:  # after a data-dependent stop only the confidence sequence's interval is valid
            ci = stop.get("sequence_ci") or ci
            notes.insert(0, escape(f"stop_when: {_stop_words(stop)} after {stop.get('episodes_used')} episodes; "
                                   "CI is the confidence sequence's (Wilson's is not valid after stopping)"))
        table.add_row(
            escape(name),
            f"[red]{r.get('state')}[/]" if r.get("state") == "failed" else str(r.get("state")),
            f"{r.get('k', 0)}/{r.get('n', 0)}",
            "-" if rate is None else f"{100 * rate:.0f}%",
            "-" if not ci else f"{100 * ci[0]:.0f}–{100 * ci[1]:.0f}%",
            str(r.get("counts", {}).get("failure", 0)),
            str(r.get("counts", {}).get("timeout", 0)),
            str(r.get("counts", {}).get("error", 0)),
            "; ".join(notes),
        )
    console.print(table)
    for name, r in result["runs"].items():
        for key, m in (r.get("metrics") or {}).items():  # partial credit beside the success rate
            interval = "" if m.get("ci_low") is None else f" [{m['ci_low']:.3g}, {m['ci_high']:.3g}]"
            console.print(
                f"{escape(name)}: {escape(str(key))} {m['mean']:.3g}{interval} (mean over {m['episodes']} episodes"
                + (f", {escape(str(m['method']))})" if m.get("method") else ")"),
                highlight=False,
            )
        reported = r.get("as_reported") if isinstance(r.get("as_reported"), dict) else None
        if reported and reported.get("figures"):  # the names the reference tool's users look for
            figures = []
            for label, f in reported["figures"].items():
                interval = "" if f.get("ci_low") is None else f" [{f['ci_low']:.3g}, {f['ci_high']:.3g}]"
                figures.append(f"{label} {f['mean']:.3g}{interval}")
            console.print(f"{escape(name)}: as {escape(str(reported.get('by') or 'its reference'))} reports it: "
                          + escape(", ".join(figures)), highlight=False)
        if r.get("error"):  # why a run failed belongs on the console, not only in runner.log
            console.print(f"[red]{escape(name)}[/]: {escape(str(r['error']))}", highlight=False)
        for warning in r.get("warnings") or []:
            console.print(f"[yellow]{escape(name)}: warning:[/] {escape(str(warning))}", highlight=False)
