"""The ``arena`` command line. It parses arguments and prints; each command calls the module
that owns the work (config, launch, rollout, results, transport)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arena.clihelp import ArenaGroup
from arena.errors import ArenaError, ConfigError, LaunchError, unwritable
from arena.rollout.invocation import SERVER_API_KEY_ENV_ENV, SERVER_HOST_ENV, SERVER_PORT_ENV

app = typer.Typer(
    name="arena",
    cls=ArenaGroup,
    help="Evaluate robot foundation-model policies in simulation.",
    epilog="Exit codes, for every command: 0 success; 1 a check failed (doctor, probe); 2 a configuration or usage "
    "error; 3 the work failed (a run, an I/O error, a taken port); 130 interrupted (143 by SIGTERM). Each command's --help says which "
    "it uses.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
plugins_app = typer.Typer(invoke_without_command=True)  # its help: the docstring of plugins() below
app.add_typer(plugins_app, name="plugins")
from arena.venvcli import app as venv_app  # noqa: E402 - `arena venv setup`, next to its aliases' code

app.add_typer(venv_app, name="venv")
from arena.exporters import export_group  # noqa: E402 - `arena export`: plugins add its formats

export_group(app)


def _print_version(value: bool) -> None:
    if value:
        from arena import __version__

        print(f"arena-core {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print arena-core's version and exit")
    ] = False,
) -> None:
    pass

class _Stdout:
    """``sys.stdout`` for the console, except that a reader that went away (``arena run | head``)
    does not stop the experiment: output from then on goes to /dev/null and the runs go on."""

    def write(self, text: str) -> int:
        try:
            return sys.stdout.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self._discard()

    @staticmethod
    def _discard() -> None:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # also what the interpreter flushes at exit
        os.close(devnull)

    def __getattr__(self, name: str):  # isatty, fileno, encoding, ...
        return getattr(sys.stdout, name)


out = Console(file=_Stdout(), soft_wrap=True)
if not out.is_terminal:  # logs and CI: do not squeeze tables into 80 columns
    out = Console(file=_Stdout(), width=160, soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

AllowImportOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--allow-import",
        metavar="MODULE",
        help="let `type: MODULE.sub:Class` in the experiment import MODULE (runs its code); repeatable, '*' for any; "
        "also $ARENA_ALLOW_IMPORTS",
    ),
]

OverridesArg = Annotated[
    Optional[list[str]],
    typer.Argument(help="KEY=VALUE overrides: shared.<path>=V, runs.<name>.<path>=V, launch.<backend>.<path>=V, tracking.<path>=V, perturbations.<path>=V"),
]


def _fail(exc: ArenaError) -> typer.Exit:
    code = 2 if isinstance(exc, ConfigError) else 3
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


# -- experiments ---------------------------------------------------------------------------
@app.command()
def validate(
    experiment: Annotated[Path, typer.Argument(help="experiment YAML file")],
    overrides: OverridesArg = None,
    list_overrides: Annotated[bool, typer.Option("--list-overrides", help="print every overridable key")] = False,
    list_runs: Annotated[
        bool, typer.Option("--list-runs", help="print every run name (matrix and environment expansions included), one a line")
    ] = False,
    allow_import: AllowImportOpt = None,
) -> None:
    """Check an experiment file without running anything.

    Exit codes:
    0  the file is valid (warnings, e.g. a missing scheduler tool, do not change that)
    2  a configuration error, naming the file, the run and the key
    """
    from arena.config import load_experiment
    from arena.launch.planning import plan_servers
    from arena.launch.submit import make_backend

    try:
        exp = load_experiment(experiment, overrides or [], allow_imports=allow_import or ())
        servers = plan_servers(exp)
        backend = make_backend(exp)
        try:
            backend.check(exp, servers)  # what the backend refuses before starting anything
        except LaunchError as exc:  # a missing tool is not a configuration error
            err.print(f"[yellow]warning:[/] {escape(str(exc))}", highlight=False)
    except ArenaError as exc:
        raise _fail(exc) from None
    if list_overrides:
        _print_overrides(exp)
        return
    if list_runs:
        for name in exp.runs:
            out.print(name, highlight=False, markup=False)
        return
    _print_run_warnings(exp)
    out.print(f"[green]ok[/]: {escape(f'{experiment} — {len(exp.runs)} run(s): ' + ', '.join(exp.runs))}")


def _print_run_warnings(exp) -> None:
    """Caveats of a valid experiment, what stops a run first: a server's program not on PATH
    (which `arena run` refuses), then missing venvs, no success signal, endpoints arena will not use."""
    from arena.envs.base import success_warning
    from arena.launch.planning import ignored_endpoints

    if exp.launch.backend == "local":  # a cluster's nodes have their own PATH
        for warning in _missing_programs(exp):  # `arena run` refuses these: named first
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for warning in getattr(exp, "warnings", []):
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for name, run_cfg in exp.runs.items():
        if warning := success_warning(run_cfg.environment_cls):
            err.print(f"[yellow]warning:[/] {escape(f'run {name}: {warning}')}", highlight=False)
        execution = getattr(run_cfg, "execution", None)
        if execution is not None and (ignored := execution.ignored_keys()):
            keys = ", ".join(f"execution.{k}" for k in ignored)
            err.print(f"[yellow]warning:[/] {escape(f'run {name}: {keys} ignored: execution.mode is sync (set execution.mode: live)')}",
                      highlight=False)
    for name, warning in ignored_endpoints(exp):
        err.print(f"[yellow]warning:[/] {escape(f'run {name}: {warning}')}", highlight=False)
    from arena.results.sample_size import detect_warning

    for name, run_cfg in exp.runs.items():
        detect = getattr(run_cfg.rollout_limit, "detect", None)
        if detect is not None and (warning := detect_warning(run_cfg.rollout_limit.num_episodes, detect)):
            err.print(f"[yellow]warning:[/] {escape(f'run {name}: {warning}')}", highlight=False)
    if exp.launch.backend == "local":  # a cluster's nodes have their own venvs
        refusals, warnings = _missing_venvs(exp)  # `arena run` refuses the former; validate warns
        for warning in refusals + warnings:
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


def _missing_programs(exp) -> list[str]:
    """One line per server task the local backend would start whose program (``uv``, ...)
    is not on PATH (:meth:`arena.servertask.ServerTask.missing_program`), naming its runs."""
    from arena.launch.planning import plan_servers
    from arena.launch.wording import run_list

    lines: dict[str, list[str]] = {}
    for run, plan in plan_servers(exp).items():
        if plan.task is not None and not plan.external and (problem := plan.task.missing_program()):
            lines.setdefault(problem, []).append(run)
    return [f"{run_list(runs)}: {problem}" for problem, runs in lines.items()]


def _setup_command(venv: str) -> str:
    """The command that creates benchmark venv ``venv``: core's ``arena venv setup NAME``
    (:attr:`arena.venvs.VenvSpec.setup_command`), which exists for every declared venv, a
    third-party plugin's too (its ``arena NAME setup`` alias exists only where the plugin adds it)."""
    return f"arena venv setup {venv}"


def _missing_venvs(exp) -> tuple[list[str], list[str]]:
    """``(refusals, warnings)``: one line per benchmark venv (an environment's ``default_venv``)
    that runs need and that does not exist on this machine. A refusal when the environment's
    ``simulator_modules`` are not importable in this interpreter either (every episode would
    fail on ImportError); a warning when the class declares none (arena cannot tell)."""
    import importlib.util

    from arena.envs.workers.layout import declared_venv_name, worker_python
    from arena.launch.wording import run_list
    from arena.venvs import venv_dir

    needing: dict[str, list[str]] = {}
    missing_modules: dict[str, list[str]] = {}
    for name, run_cfg in exp.runs.items():
        env_cls = run_cfg.environment_cls
        venv = declared_venv_name(env_cls, run_cfg.environment)
        if not venv or worker_python(env_cls, run_cfg.environment) is not None:
            continue
        modules = tuple(getattr(env_cls, "simulator_modules", ()))
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        if modules and not absent:
            continue  # the simulator is installed here: the envs run in this interpreter
        needing.setdefault(venv, []).append(name)
        if absent:
            missing_modules.setdefault(venv, sorted(set(missing_modules.get(venv, []) + absent)))
    refusals, warnings = [], []
    for venv, runs in needing.items():
        where = f"{run_list(runs)}: the environment runs in its own venv '{venv}', which does not exist ({venv_dir(venv)})"
        if venv in missing_modules:
            refusals.append(
                f"{exp.source or 'the experiment'}: {where}, and its simulator ({', '.join(missing_modules[venv])}) "
                f"is not installed in this interpreter ({sys.executable}), so every episode will fail: "
                f"create the venv once with `{_setup_command(venv)}` (or set environment.python)"
            )
        else:
            warnings.append(
                f"{where}; its envs run in this interpreter instead: unless its simulator is installed here, every "
                f"episode will fail, and another build of it may give other episodes: create it once with `{_setup_command(venv)}`"
            )
    return refusals, warnings


def _print_overrides(exp) -> None:
    from arena.config import list_overrides
    from arena.envs.perturbations import listing

    for key, value in list_overrides(exp):
        out.print(f"{key}={json.dumps(value) if not isinstance(value, str) else value}", highlight=False, markup=False)
    shown: set[str] = set()
    for name, run_cfg in exp.runs.items():  # the perturbations each environment accepts, once per type
        if run_cfg.environment_type in shown:
            continue
        shown.add(run_cfg.environment_type)
        out.print(f"# perturbations of environment {run_cfg.environment_type} "
                  f"(runs.{name}.environment.perturbations.NAME=VALUE):", highlight=False, markup=False)
        for line in listing(run_cfg.environment_type, run_cfg.environment_cls, run_cfg.environment):
            out.print(f"#   {line}", highlight=False, markup=False)


@app.command()
def run(
    experiment: Annotated[Optional[Path], typer.Argument(help="experiment YAML file (omit with --resume)")] = None,
    overrides: OverridesArg = None,
    output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="exact output directory")] = None,
    runs: Annotated[
        Optional[list[str]],
        typer.Option(
            "--run",
            metavar="NAME",
            help="run only this run (repeatable): a run name, the name of a run that expanded (a matrix's: every "
            "NAME.<suffix>), or a quoted glob ('eval.s1000-*'); the rest stay in the output for --resume",
        ),
    ] = None,
    resume: Annotated[
        Optional[Path],
        typer.Option("--resume", help="OUTPUT_DIR of an interrupted experiment: run only its unfinished work items"),
    ] = None,
    keep_errors: Annotated[
        bool, typer.Option("--keep-errors", help="with --resume: keep `error` episodes instead of retrying them")
    ] = False,
    backend: Annotated[Optional[str], typer.Option("--backend", help="shorthand for launch.backend=NAME")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", help="shorthand for launch.local.jobs=N")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="wait for a remote backend and collect")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the resolved runs and server tasks")] = False,
    list_overrides: Annotated[bool, typer.Option("--list-overrides", help="print every overridable key")] = False,
    allow_import: AllowImportOpt = None,
) -> None:
    """Run an experiment: every run, with its policy servers started and stopped by arena.

    `arena run --resume OUTPUT_DIR` continues an interrupted experiment from its snapshot: only work items without a finished record run (error episodes are retried unless --keep-errors); the report is rebuilt from all records.

    `--run NAME` (repeatable, globs allowed; `arena validate FILE --list-runs` lists the names) runs only the runs it selects, into the output directory a full run would use; the report lists every run, those without records as pending, and `arena run --resume OUTPUT_DIR` later runs the rest. With --resume it limits the resume to the selected runs. The exit code judges the selected runs.

    Exit codes:
    0    every run completed without error episodes
         (a cluster backend without --wait: every run submitted)
    2    a configuration error, --output-dir is not empty, or --run selects no run
    3    a run failed or has error episodes, or the output could not be written
    130  interrupted (Ctrl-C); `arena run --resume OUTPUT_DIR` finishes it
    143  cancelled (SIGTERM: `arena cancel`, a scheduler); the same `--resume` finishes it
    """
    from arena.config import load_experiment
    from arena.launch.submit import resume_experiment, run_experiment

    if resume is not None:
        if experiment is not None or overrides or output_dir is not None or backend or dry_run or allow_import:
            raise _fail(
                ConfigError(
                    "--resume OUTPUT_DIR takes no experiment file, overrides or other run options (but --jobs, --run, "
                    "--keep-errors and --wait): it reuses the snapshot"
                )
            )
        try:
            code = resume_experiment(resume, keep_errors=keep_errors, wait=wait, console=out, jobs=jobs, runs=runs)
        except ArenaError as exc:
            raise _fail(exc) from None
        except OSError as exc:
            raise _fail(LaunchError(unwritable(exc))) from None
        raise typer.Exit(code)
    if experiment is None:
        raise _fail(ConfigError("give an experiment file (or --resume OUTPUT_DIR)"))
    if keep_errors:
        raise _fail(ConfigError("--keep-errors only applies with --resume OUTPUT_DIR"))
    extra = list(overrides or [])
    if backend:
        extra.append(f"launch.backend={backend}")
    if jobs is not None:
        extra.append(f"launch.local.jobs={jobs}")
    try:
        exp = load_experiment(experiment, extra, allow_imports=allow_import or ())
        if list_overrides:
            _print_overrides(exp)
            return
        launched = exp
        if runs:  # the venvs and warnings of the runs that will run; run_experiment selects them again, by name
            from arena.config.selection import select_runs

            runs = select_runs(exp.runs, runs, source=exp.source)
            launched = exp.only(runs)
        if exp.launch.backend == "local" and (refusals := _missing_venvs(launched)[0]):
            raise ConfigError("\n".join(refusals))  # before anything starts; --dry-run says it too
        if exp.launch.backend == "local" and not dry_run and (missing := _missing_programs(launched)):
            raise ConfigError("\n".join(missing))  # a server that cannot start: before anything starts
        _print_run_warnings(launched)
        code = run_experiment(exp, output_dir=output_dir, wait=wait, dry_run=dry_run, console=out, runs=runs)
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:  # the output directory cannot be written: one line, exit 3
        raise _fail(LaunchError(unwritable(exc))) from None
    raise typer.Exit(code)


@app.command()
def watch(
    checkpoint_dir: Annotated[Path, typer.Argument(help="folder the training writes checkpoints into")],
    experiment: Annotated[Path, typer.Option("--experiment", help="experiment YAML file evaluated per checkpoint")],
    overrides: OverridesArg = None,
    pattern: Annotated[
        str, typer.Option("--pattern", help="regex an entry's name must fully match; its named group `step` is the training step")
    ] = r".*?(?P<step>\d+)\D*",
    settle: Annotated[float, typer.Option("--settle", help="seconds a checkpoint must stay unchanged before it is read")] = 30.0,
    poll: Annotated[float, typer.Option("--poll", help="seconds between looks at CHECKPOINT_DIR")] = 5.0,
    jobs: Annotated[int, typer.Option("--jobs", help="evaluations at once")] = 1,
    output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="the watch's folder (state, one output per checkpoint); default outputs/<experiment>-watch")] = None,
    max_evaluations: Annotated[Optional[int], typer.Option("--max-evaluations", help="stop after this many evaluations in all (default: watch forever)")] = None,
    retries: Annotated[int, typer.Option("--retries", help="times a failed evaluation is tried again (arena run --resume) before it counts as failed")] = 2,
    allow_import: AllowImportOpt = None,
) -> None:
    """Evaluate each new checkpoint of CHECKPOINT_DIR, in order of step, once each.

    Give the override that takes the checkpoint with {checkpoint} for its path (and {step} if wanted), e.g. `arena watch ckpts/ --experiment exp.yaml shared.server.checkpoint={checkpoint}`; tracking.step is set to the step.

    One watch owns its --output-dir (watch.lock: a second is refused, naming the first; the lock of a dead watch is taken over). Started again on the same --output-dir, the watch skips what it evaluated, resumes what it was evaluating (watch.json) and tries again what failed for a reason other than the checkpoint's own files. A failed evaluation is recorded with its reason and tried again (--retries times). A checkpoint evaluated under a changed experiment starts a new series (`<run> · setup 2`), with what changed printed and listed. Each evaluation's success rates are printed as it ends, a table at the end; --output-dir/index.html plots success rate and each episode metric against training step.

    Exit codes:
    0    --max-evaluations reached, every evaluation succeeded
    2    a configuration error, or another arena watch owns --output-dir
    3    --max-evaluations reached, some evaluation failed after its retries (listed at the end)
    130  interrupted (Ctrl-C); 143 terminated: start it again to resume
    """
    from arena.watch import Watch

    try:
        if not experiment.is_file():
            raise ConfigError(f"--experiment {experiment}: no such file")
        watch_dir = output_dir or Path("outputs") / f"{experiment.stem}-watch"
        code = Watch(checkpoint_dir, experiment, list(overrides or []), watch_dir, pattern=pattern, settle_s=settle,
                     poll_s=poll, jobs=jobs, max_evaluations=max_evaluations, retries=retries,
                     allow_imports=list(allow_import or [])).run()
    except ArenaError as exc:
        raise _fail(exc) from None
    raise typer.Exit(code)


@app.command("run-one")
def run_one(
    snapshot: Annotated[Path, typer.Argument(help="resolved experiment.yaml of an output directory")],
    run_name: Annotated[str, typer.Option("--run", help="run to execute")],
    output_dir: Annotated[Path, typer.Option("--output-dir", help="experiment output directory")],
    server_host: Annotated[Optional[str], typer.Option("--server-host", envvar=SERVER_HOST_ENV)] = None,
    server_port: Annotated[Optional[int], typer.Option("--server-port", envvar=SERVER_PORT_ENV)] = None,
    server_api_key_env: Annotated[
        Optional[str],
        typer.Option(
            "--server-api-key-env", envvar=SERVER_API_KEY_ENV_ENV, help="NAME of the variable holding the server's key"
        ),
    ] = None,
    shard: Annotated[Optional[str], typer.Option("--shard", help="K/N: the work items whose index ≡ K mod N")] = None,
    queue: Annotated[
        bool,
        typer.Option("--queue", help="claim the run's episodes from OUTPUT_DIR/queue.sqlite (a backend loaded it); "
                     "with --shard, K/N only names the work directory"),
    ] = False,
    resume: Annotated[bool, typer.Option("--resume", help="skip work items that already have a finished record")] = False,
    keep_errors: Annotated[bool, typer.Option("--keep-errors", help="with --resume: do not retry `error` episodes")] = False,
    allow_import: AllowImportOpt = None,
) -> None:
    """Execute one run (or one shard of it) from a snapshot; every backend runs runs through this.

    The snapshot's own `allow_imports` (written by `arena run`) is honoured.

    Exit codes:
    0  the run (or shard) completed without error episodes
    2  a configuration error in the snapshot or the options
    3  the run failed or has error episodes
    """
    from arena.rollout.run_one import run_one as _run_one

    from arena.rollout.workitems import parse_shard

    shard_t = None
    if shard is not None:
        try:
            shard_t = parse_shard(shard)
        except ValueError as exc:
            raise _fail(ConfigError(f"--shard: {exc}")) from None
    code = _run_one(
        snapshot,
        run_name,
        output_dir,
        server_host=server_host,
        server_port=server_port,
        server_api_key_env=server_api_key_env,
        shard=shard_t,
        queue=queue,
        resume=resume,
        keep_errors=keep_errors,
        allow_imports=allow_import or (),
    )
    raise typer.Exit(code)


@app.command()
def node(
    spec: Annotated[str, typer.Argument(help="path of the node spec file (JSON) a backend rendered; $VARs in the path are expanded")],
    shard: Annotated[Optional[str], typer.Option("--shard", help="K/N: shard K of the run")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="skip work items that already have a finished record")] = False,
    keep_errors: Annotated[bool, typer.Option("--keep-errors", help="with --resume: do not retry `error` episodes")] = False,
    signalled: Annotated[
        Optional[list[str]],
        typer.Option("--signalled", help="TERM or USR1: a signal the job script received before arena started"),
    ] = None,
) -> None:
    """Supervise one run (or shard) on this node: its policy server, then `arena run-one`.

    What a Slurm job or an OSMO task runs (arena.launch.node): starts the server, waits until it
    is ready and is the one it started, restarts it while the runner works, stops it at the end,
    and writes the final state the runner could not.

    Exit codes: the runner's; 3 when the run failed before the runner started; 2 an unreadable spec.
    """
    from arena.launch.node import main as node_main

    if spec.lstrip().startswith("{"):
        raise _fail(ConfigError("SPEC is the path of the node spec file a backend rendered, not its JSON text: "
                                "write the JSON to a file and pass its path"))
    try:
        code = node_main(spec, shard, resume, keep_errors, signalled or ())
    except ValueError as exc:
        raise _fail(ConfigError(str(exc))) from None
    raise typer.Exit(code)


# -- submissions -----------------------------------------------------------------------------
@app.command()
def status(output_dir: Annotated[Path, typer.Argument(help="experiment output directory")]) -> None:
    """Show the state of every run of a submission (why a pending run waits, why a run failed).

    Exit codes:
    0  shown
    2  not an arena output directory
    3  the scheduler could not be asked
    """
    from arena.launch.submit import submission_status

    try:
        states = submission_status(output_dir)
    except ArenaError as exc:
        raise _fail(exc) from None
    from arena.outputs.records import FINAL_STATES, partial_note

    table = Table("run", "state", "episodes", "successes", "errors", "note")
    for name, st in states.items():
        note = None
        if st.get("state") in FINAL_STATES:  # a finished run whose numbers cover less than planned
            total = st.get("episodes_total")
            note = partial_note(
                st.get("state"), int(st.get("episodes_done") or 0), total if isinstance(total, int) else None,
                int(st.get("errors") or 0),
            )
        table.add_row(
            escape(name),
            str(st.get("state")),
            f"{st.get('episodes_done', 0)}/{st.get('episodes_total', '?')}",
            str(st.get("successes", 0)),
            str(st.get("errors", 0)),
            f"[yellow]{escape(note)}[/]" if note else "",
        )
    out.print(table)
    for name, st in states.items():
        if st.get("pending_reason") and not st.get("error"):
            out.print(f"[yellow]{escape(name)}[/]: waiting: {escape(str(st['pending_reason']))}", highlight=False)
        if st.get("error"):
            out.print(f"[red]{escape(name)}[/]: {escape(str(st['error']))}", highlight=False)
        for warning in st.get("warnings") or []:
            out.print(f"[yellow]{escape(name)}: warning:[/] {escape(str(warning))}", highlight=False)


@app.command()
def cancel(output_dir: Annotated[Path, typer.Argument(help="experiment output directory")]) -> None:
    """Cancel a running submission; finished episodes are kept.

    Exit codes:
    0  cancel requested, or nothing left to cancel
    2  not an arena output directory
    3  the scheduler refused or could not be reached
    """
    from arena.launch.submit import cancel_submission, submission_status

    try:
        states = submission_status(output_dir)
    except LaunchError:  # the scheduler could not be asked; cancel anyway
        states = {}
    except ArenaError as exc:
        raise _fail(exc) from None
    from arena.outputs.records import FINAL_STATES

    if states and all(st.get("state") in FINAL_STATES for st in states.values()):
        out.print(f"nothing to cancel: every run of {output_dir} has finished", highlight=False, markup=False)
        return
    try:
        cancel_submission(output_dir)
    except ArenaError as exc:
        raise _fail(exc) from None
    out.print(f"cancel requested for {output_dir}", highlight=False, markup=False)


@app.command()
def collect(output_dir: Annotated[Path, typer.Argument(help="experiment output directory")]) -> None:
    """Gather a submission's outputs and build experiment_result.json and index.html.

    Exit codes:
    0  gathered and reported
    2  not an arena output directory
    3  the outputs could not be fetched or the report could not be written
    """
    from arena.launch.submit import collect_submission

    try:
        report = collect_submission(output_dir)
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(LaunchError(unwritable(exc))) from None
    out.print(f"report: {report}", markup=False)


@app.command()
def report(
    output_dir: Annotated[Path, typer.Argument(help="experiment output directory")],
    redact: Annotated[
        bool,
        typer.Option(
            "--redact/--no-redact",
            help="leave host names, the kernel and local paths out of index.html, so it can be shared (the default); "
            "provenance.json keeps them either way",
        ),
    ] = True,
) -> None:
    """Rebuild experiment_result.json and index.html from the records (any record format_version this arena knows).

    index.html leaves out host names, the kernel and local paths unless --no-redact.

    Exit codes:
    0  rebuilt
    2  not an arena output directory
    3  the report could not be written
    """
    from arena.results.report import write_report

    _require_output_dir(output_dir)
    try:
        path = write_report(output_dir, redact=redact)
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:
        raise _fail(LaunchError(unwritable(exc))) from None
    out.print(f"report: {path}", highlight=False, soft_wrap=True, markup=False)


def _require_output_dir(path: Path) -> None:
    """Refuse a directory that is not the output of ``arena run`` (exit 2)."""
    from arena.outputs.layout import EXPERIMENT_FILE, MANIFEST_FILE

    if not path.is_dir() or not ((path / EXPERIMENT_FILE).exists() or (path / MANIFEST_FILE).exists()):
        raise _fail(
            ConfigError(
                f"{path} is not an arena output directory (no experiment.yaml or manifest.json); "
                "give the directory `arena run` printed, e.g. outputs/<experiment>/<timestamp>"
            )
        )


@app.command()
def compare(
    a: Annotated[Path, typer.Argument(help="output directory of experiment A")],
    b: Annotated[Path, typer.Argument(help="output directory of experiment B")],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="compare runs whose environment, task, seeds or rollout limits differ")
    ] = False,
    pair: Annotated[
        Optional[list[str]],
        typer.Option("--pair", help="RUN_A:RUN_B: compare run RUN_A of A with run RUN_B of B (repeatable; A and B may be one directory)"),
    ] = None,
) -> None:
    """Compare two experiments run by run: B − A with its 95% interval and a test.

    Runs are matched by name (or as --pair names them, e.g. two policies of one experiment:
    `arena compare OUT OUT --pair vla_eval_run:openpi_run`) and compared only when their environment (type, task, fields),
    seeds and rollout limits agree (exit 2 naming what differs; --force compares anyway and
    prints the differences first). Like runs are compared paired (McNemar's exact test,
    Newcombe's paired interval), forced unlike ones unpaired (Fisher, Newcombe); each row
    says which and why. Several tests: p-values Holm-adjusted. Suites (expanded runs) are
    compared task-averaged over their common tasks. Exit 3 when a compared run is partial (cancelled, failed,
    still running, episodes missing or error episodes).

    Exit codes:
    0  compared
    2  A or B is not an arena output directory, or compared runs differ (without --force)
    3  a compared run is partial
    """
    from arena.results import compare as comparison

    _require_output_dir(a)
    _require_output_dir(b)
    pairs = None
    if pair:
        pairs = [tuple(item.split(":", 1)) for item in pair]
        bad = [item for item, parsed in zip(pair, pairs) if len(parsed) != 2 or not all(parsed)]
        if bad:
            raise _fail(ConfigError(f"--pair {bad[0]!r}: expected RUN_A:RUN_B"))
    try:
        data = comparison.compare_experiments(a, b, pairs)
        differences = comparison.check_comparable(data, a, b, force)
    except FileNotFoundError as exc:
        raise _fail(ConfigError(str(exc))) from None
    except ConfigError as exc:
        raise _fail(exc) from None
    partial = comparison.partial_lines(data)
    code = comparison.exit_code(data)
    if as_json:
        out.print_json(json.dumps(data))
        for line in partial:
            err.print(f"[yellow]{escape(line)}[/]", highlight=False)
        raise typer.Exit(code)
    if differences:
        out.print("[yellow bold]compared with --force although the runs' setups differ:[/]", highlight=False)
        for line in differences:
            out.print(f"  [yellow]{escape(line)}[/]", highlight=False)
    table = Table(*comparison.HEADERS, title=escape(f"A = {a}   B = {b}"))
    for cells in comparison.table(data):
        table.add_row(*cells)
    out.print(table)
    if data["only_a"]:
        out.print(f"only in A: {', '.join(data['only_a'])}", highlight=False, markup=False)
    if data["only_b"]:
        out.print(f"only in B: {', '.join(data['only_b'])}", highlight=False, markup=False)
    for line in comparison.suite_lines(data):
        out.print(line, highlight=False, markup=False)
    for line in comparison.notes(data):
        out.print(line, style="dim", highlight=False)
    for line in partial:
        err.print(f"[yellow]partial:[/] {escape(line)}; its rate covers fewer episodes than planned", highlight=False)
    raise typer.Exit(code)


@app.command("plan-episodes")
def plan_episodes(
    baseline: Annotated[float, typer.Option("--baseline", help="the success rate of the run compared against (0-1)")],
    detect: Annotated[float, typer.Option("--detect", help="the difference of success rates to resolve (0-1)")],
    paired: Annotated[bool, typer.Option("--paired", help="both runs play the same episodes (same seeds and init states)")] = False,
    discordant: Annotated[
        Optional[float], typer.Option("--discordant", help="with --paired: fraction of episodes only one run solves")
    ] = None,
    power: Annotated[float, typer.Option("--power", help="probability of resolving the difference when it is there")] = 0.8,
    confidence: Annotated[float, typer.Option("--confidence", help="1 - the two-sided test's level")] = 0.95,
    levels: Annotated[
        Optional[int],
        typer.Option("--levels", help="plan a perturbation sweep of this many perturbed levels, each compared with "
                     "nominal on the same seeds (Holm over all): seeds per run and episodes in all"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Episodes per run needed to resolve a difference of success rates, and what early stopping saves.

    With --levels M (a perturbation sweep: nominal + M perturbed runs on the same seeds, each
    compared with nominal, Holm-adjusted), the seeds every run needs, each test planned at
    level (1 - confidence) / M; use --paired with --discordant (a perturbation that only
    breaks seeds nominal solved has discordant = detect, the fewest seeds).

    Unpaired: Fleiss, Levin & Paik (2003) eq. 4.14; paired: Connor (1987). The saving is
    simulated (fixed seed) for one run with stop_when.threshold = baseline whose true rate is
    baseline + detect.

    Exit codes:
    0  planned
    2  a value out of range (or --paired without --discordant)
    """
    from arena.results.sample_size import plan

    try:
        result = plan(baseline, detect, paired=paired, discordant=discordant, power=power, confidence=confidence,
                      levels=levels)
    except ValueError as exc:
        raise _fail(ConfigError(str(exc))) from None
    if as_json:
        out.print_json(json.dumps(result))
        raise typer.Exit(0)
    design = "paired" if paired else "unpaired"
    method = result["paired_method"] if paired else result["unpaired_method"]
    goal = f"to resolve {100 * detect:+.1f} points from {100 * baseline:.1f}% with {power:.0%} power"
    if levels is not None:
        sweep = result["sweep"]
        out.print(
            f"sweep of {levels} perturbed level(s) + nominal, {design}: [bold]{sweep['seeds_per_run']}[/] "
            f"seeds per run ({sweep['episodes_total']} episodes in all) {goal}, each test at "
            f"{sweep['per_test_confidence']:.2%} ({sweep['adjustment']}; {method})",
            highlight=False,
        )
    else:
        out.print(f"{design}: [bold]{result['episodes_per_run']}[/] episodes per run {goal} at {confidence:.0%} ({method})",
                  highlight=False)
    if paired:
        out.print(f"unpaired runs would need {result['unpaired_episodes_per_run']} each", highlight=False)
    if levels is not None:
        raise typer.Exit(0)
    stop = result["early_stopping"]
    out.print(
        f"early stopping (rollout_limit.stop_when: {{threshold: {baseline}}}) on one run at {100 * stop['rate']:.1f}%: "
        f"{stop['mean_episodes']:.0f} episodes on average (median {stop['median_episodes']:.0f}, 90% within "
        f"{stop['p90_episodes']:.0f}) instead of {stop['max_episodes']}; decided above in {stop['decisions']['above']:.0%} "
        f"of {stop['replicates']} simulated runs (seed {stop['seed']})",
        highlight=False,
    )
    raise typer.Exit(0)


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    render: Annotated[bool, typer.Option("--render/--no-render", help="render one Meta-World frame headless")] = True,
) -> None:
    """Check this machine: versions, plugins, headless rendering, schedulers, ports (each failure with a fix).

    Exit codes:
    0  no check failed (warnings and information allowed)
    1  at least one check failed
    """
    from arena.doctor import run_checks

    checks = run_checks(render=render)
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        out.print_json(json.dumps([c.to_dict() for c in checks]))
    else:
        table = Table("check", "status", "detail", "fix")
        colour = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}
        for c in checks:
            table.add_row(escape(c.name), f"[{colour.get(c.status, 'white')}]{c.status}[/]", escape(c.detail), escape(c.fix or ""))
        out.print(table)
        out.print(f"{len(failed)} problem(s)" if failed else "[green]all checks passed[/]")
    raise typer.Exit(1 if failed else 0)


# -- servers ---------------------------------------------------------------------------------
@app.command()
def serve(
    name: Annotated[str, typer.Argument(help="registered server model (e.g. metaworld-expert) or package.module:factory")],
    host: Annotated[Optional[str], typer.Option(
        help="bind address (0.0.0.0 exposes the server; default: the server's, loopback)", show_default=False)] = None,
    port: Annotated[Optional[int], typer.Option(help="port (default: the server's)", min=0, max=65535, show_default=False)] = None,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="model option KEY=VALUE")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="NAME of the variable holding the API key")] = None,
    max_batch_size: Annotated[Optional[int], typer.Option(
        help="requests per infer_batch call (default: the server's for models with infer_batch, else 1; 1 turns batching off)",
        show_default=False, min=1)] = None,
    max_wait_ms: Annotated[Optional[float], typer.Option(
        help="how long the first request of a batch waits for company, ms (default: the server's)", show_default=False)] = None,
    max_connections: Annotated[Optional[int], typer.Option(
        help="WebSocket connections served at once (runs x num_envs sharing this server); more get HTTP 503 "
        "(default: the server's)", show_default=False, min=1)] = None,
    handshake_timeout_s: Annotated[Optional[float], typer.Option(
        help="close connections that have not completed the handshake by then, s (default: the server's)",
        show_default=False)] = None,
    inline_below_ms: Annotated[Optional[float], typer.Option(
        help="run a request on the event-loop thread while recent inferences took less than this, ms (0: never; "
        "default: the server's)", show_default=False, min=0)] = None,
    concurrent_batches: Annotated[Optional[int], typer.Option(
        help="batches in the model at once, for thread-safe models (default: the model's concurrent_batches, else 1)",
        show_default=False, min=1)] = None,
) -> None:
    """Serve a registered model with arena's policy server (openpi websocket protocol).

    Exit codes:
    0  stopped by Ctrl-C or SIGTERM
    2  an unknown model, a malformed --option or an unset --api-key-env variable
    3  the model could not be built, or the address cannot be bound (a taken port)
    """
    import os

    import yaml

    from arena.plugins import get_plugin_manager
    from arena.transport.policy_server import PolicyServer

    manager = get_plugin_manager()
    registry = manager.registry
    if name not in registry.servers and ":" not in name:
        raise _fail(ConfigError(
            f"unknown server '{name}' (registered: {', '.join(sorted(registry.servers)) or 'none'}; "
            f"or use package.module:factory)"
        ))
    try:
        # a module named on this command line is the user's own choice, not an experiment file's
        factory = manager.resolve_class("servers", name, allow_import=True)
    except ArenaError as exc:
        raise _fail(exc) from None
    options = {}
    for item in option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise _fail(ConfigError(f"--option must be KEY=VALUE, got {item!r}"))
        options[key] = yaml.safe_load(value)
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if api_key is None:
            raise _fail(ConfigError(f"--api-key-env names {api_key_env}, which is not set"))
    server = None
    try:
        # what is not given on the command line is the server's own default
        given = {key: value for key, value in {
            "host": host, "port": port, "max_batch_size": max_batch_size, "max_wait_ms": max_wait_ms,
            "max_connections": max_connections, "handshake_timeout_s": handshake_timeout_s,
            "concurrent_batches": concurrent_batches, "inline_below_ms": inline_below_ms,
        }.items() if value is not None}
        server = PolicyServer(factory(**options), api_key=api_key, **given)
        # Said once the socket is bound (a taken port fails before it), with the real port (--port 0).
        server.run(on_bound=lambda bound: err.print(
            f"serving {name} on ws://{bound.host}:{bound.port} (healthz: http://{bound.host}:{bound.port}/healthz; "
            f"{bound.describe()})", highlight=False, markup=False,
        ))
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:  # e.g. the port is taken
        where = f"{server.host}:{server.port}" if server is not None else f"{host}:{port}"
        err.print(f"[bold red]error:[/] {escape(f'cannot serve on {where}: {exc.strerror or exc}')}", highlight=False)
        raise typer.Exit(3) from None


@app.command()
def probe(
    kind: Annotated[str, typer.Argument(help="websocket | tcp | zmq-ping | http:<path>")],
    host: Annotated[str, typer.Argument()],
    port: Annotated[int, typer.Argument()],
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait until ready")] = 60.0,
    api_key_env: Annotated[Optional[str], typer.Option(help="NAME of the variable holding the API key")] = None,
) -> None:
    """Wait until a policy server is ready, or the timeout passes.

    Exit codes:
    0  ready
    1  not ready within --timeout
    2  an unknown probe kind
    """
    import os

    from arena.transport.probe import wait_until_ready

    api_key = os.environ.get(api_key_env) if api_key_env else None
    try:
        wait_until_ready(kind, host, port, timeout, api_key=api_key)
    except ConfigError as exc:  # e.g. an unknown probe kind: a usage error, not "not ready"
        raise _fail(exc) from None
    except ArenaError as exc:
        err.print(f"not ready: {exc}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    out.print(f"ready: {kind} {host}:{port}", markup=False)


# -- plugins ---------------------------------------------------------------------------------

@plugins_app.callback()
def plugins(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List plugins: name, distribution, version, what each registered (policies, commands, ...), and each plugin that failed to load, with its traceback.

    Exit codes:
    0  listed (a plugin that failed to load is listed, not an error)
    3  two plugins register the same name
    """
    if ctx.invoked_subcommand is not None:
        return
    from arena.plugins import get_plugin_manager

    manager = get_plugin_manager()
    try:
        manager.describe()
    except ArenaError as exc:
        raise _fail(exc) from None
    data = {
        "plugins": [
            {
                "name": i.name,
                "distribution": i.distribution,
                "version": i.version,
                "builtin": i.builtin,
                "hooks": sorted(set(i.hooks)),
                "registered": i.registered,
            }
            for i in manager.infos.values()
        ],
        "broken": [
            {"name": b.name, "distribution": b.distribution, "error": b.error, "traceback": b.traceback}
            for b in manager.broken
        ],
    }
    from arena.envs.perturbations import GENERIC, declared_by_class, describe_all

    environments = manager.registry.environments
    data["perturbations"] = {name: describe_all(declared_by_class(cls)) for name, cls in environments.items()}
    if as_json:
        out.print_json(json.dumps(data))
        return
    table = Table("plugin", "distribution", "version", "registered")
    for p in data["plugins"]:
        reg = "; ".join(f"{k}: {', '.join(v)}" for k, v in p["registered"].items())
        table.add_row(*(escape(str(cell)) for cell in (p["name"], p["distribution"] or "-", p["version"] or "-", reg or "-")))
    out.print(table)
    perturbations = Table("environment", "simulator perturbations (environment.perturbations)")
    for name, declared in data["perturbations"].items():
        perturbations.add_row(escape(name), escape(", ".join(f"{p['name']} ({p['unit']})" for p in declared) or "-"))
    out.print(perturbations)
    out.print("every environment also takes the generic perturbations: " + ", ".join(GENERIC), highlight=False, markup=False)
    for b in data["broken"]:  # the traceback is what its author needs; this is where hints send users
        err.print("[red]broken plugin[/] " + escape(f"{b['name']} ({b['distribution']}): {b['error']}"), highlight=False)
        err.print(b["traceback"].rstrip(), style="dim", highlight=False, markup=False)


@plugins_app.command("new")
def plugins_new(
    name: Annotated[str, typer.Argument(help="plugin name, e.g. my-vla (distribution arena-plugin-NAME, import arena_NAME)")],
    directory: Annotated[
        Optional[Path], typer.Option("--dir", help="where to create the package (default ./arena-plugin-NAME)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="write into an existing non-empty directory")] = False,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="remote-policy (client, adapter, server task, servable model), environment, "
            "or local-policy (runs in the simulation process)",
        ),
    ] = "remote-policy",
) -> None:
    """Create a plugin package with tests that pass as generated and a README: a remote policy
    (client, adapter, server task, servable model), an environment, or a local policy.

    Exit codes:
    0  created
    2  an invalid name or kind, or the directory exists and is not empty (without --force)
    """
    from arena.scaffold import create_plugin

    try:
        created = create_plugin(name, directory, force=force, kind=kind)
    except ArenaError as exc:
        raise _fail(exc) from None
    out.print(f"created {created.root} ({len(created.files)} files)", highlight=False, soft_wrap=True, markup=False)
    out.print(
        f"next: python -m pip install -e '{created.root}[test]' && python -m pytest {created.root / 'tests'}  "
        f"(then `arena plugins` lists '{created.entry_point}')",
        highlight=False,
        soft_wrap=True,
        markup=False,  # '[test]' is an extra, not a rich style
    )


def main() -> None:
    """Entry point of the ``arena`` script: loads plugin commands, then runs the CLI."""
    from arena.plugins import get_plugin_manager

    try:
        get_plugin_manager().register_commands(app)
    except ArenaError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(2)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
