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
    typer.Argument(help="KEY=VALUE overrides: shared.<path>=V, runs.<name>.<path>=V, launch.<backend>.<path>=V"),
]


def _fail(exc: ArenaError) -> typer.Exit:
    from rich.markup import escape

    code = 2 if isinstance(exc, ConfigError) else 3
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


# -- experiments ---------------------------------------------------------------------------
@app.command()
def validate(
    experiment: Annotated[Path, typer.Argument(help="experiment YAML file")],
    overrides: OverridesArg = None,
    list_overrides: Annotated[bool, typer.Option("--list-overrides", help="print every overridable key")] = False,
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
            err.print(f"[yellow]warning:[/] {exc}", highlight=False)
    except ArenaError as exc:
        raise _fail(exc) from None
    if list_overrides:
        _print_overrides(exp)
        return
    _print_run_warnings(exp)
    out.print(f"[green]ok[/]: {experiment} — {len(exp.runs)} run(s): {', '.join(exp.runs)}")


def _print_run_warnings(exp) -> None:
    """Caveats of a valid experiment: no success signal, endpoints arena will not use."""
    from arena.envs.base import success_warning
    from arena.launch.planning import ignored_endpoints

    for name, run_cfg in exp.runs.items():
        if warning := success_warning(run_cfg.environment_cls):
            err.print(f"[yellow]warning:[/] run {name}: {warning}", highlight=False)
    for name, warning in ignored_endpoints(exp):
        err.print(f"[yellow]warning:[/] run {name}: {warning}", highlight=False)
    if exp.launch.backend == "local":  # a cluster's nodes have their own venvs
        for warning in _missing_venvs(exp):
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


def _missing_venvs(exp) -> list[str]:
    """One warning per benchmark venv (an environment's ``default_venv``) that runs need and
    that does not exist on this machine: their episodes fail unless the simulator is installed
    in this interpreter."""
    from arena.envs.workers.layout import declared_venv_name, worker_python
    from arena.venvs import venv_dir

    needing: dict[str, list[str]] = {}
    for name, run_cfg in exp.runs.items():
        venv = declared_venv_name(run_cfg.environment_cls)
        if venv and worker_python(run_cfg.environment_cls, run_cfg.environment) is None:
            needing.setdefault(venv, []).append(name)
    return [
        f"run(s) {', '.join(runs)}: the environment runs in its own venv '{venv}', which does not exist "
        f"({venv_dir(venv)}); unless its simulator is installed in this interpreter, every episode will fail: "
        f"create it once with `arena {venv} setup`"
        for venv, runs in needing.items()
    ]


def _print_overrides(exp) -> None:
    from arena.config import list_overrides

    for key, value in list_overrides(exp):
        out.print(f"{key}={json.dumps(value) if not isinstance(value, str) else value}", highlight=False, markup=False)


@app.command()
def run(
    experiment: Annotated[Optional[Path], typer.Argument(help="experiment YAML file (omit with --resume)")] = None,
    overrides: OverridesArg = None,
    output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="exact output directory")] = None,
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

    Exit codes:
    0    every run completed without error episodes
         (a cluster backend without --wait: every run submitted)
    2    a configuration error, or --output-dir is not empty
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
                    "--resume OUTPUT_DIR takes no experiment file, overrides or other run options (but --jobs, "
                    "--keep-errors and --wait): it reuses the snapshot"
                )
            )
        try:
            code = resume_experiment(resume, keep_errors=keep_errors, wait=wait, console=out, jobs=jobs)
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
        _print_run_warnings(exp)
        code = run_experiment(exp, output_dir=output_dir, wait=wait, dry_run=dry_run, console=out)
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:  # the output directory cannot be written: one line, exit 3
        raise _fail(LaunchError(unwritable(exc))) from None
    raise typer.Exit(code)


@app.command("run-one")
def run_one(
    snapshot: Annotated[Path, typer.Argument(help="resolved experiment.yaml of an output directory")],
    run_name: Annotated[str, typer.Option("--run", help="run to execute")],
    output_dir: Annotated[Path, typer.Option("--output-dir", help="experiment output directory")],
    server_host: Annotated[Optional[str], typer.Option("--server-host", envvar="ARENA_SERVER_HOST")] = None,
    server_port: Annotated[Optional[int], typer.Option("--server-port", envvar="ARENA_SERVER_PORT")] = None,
    server_api_key_env: Annotated[
        Optional[str],
        typer.Option(
            "--server-api-key-env", envvar="ARENA_SERVER_API_KEY_ENV", help="NAME of the variable holding the server's key"
        ),
    ] = None,
    shard: Annotated[Optional[str], typer.Option("--shard", help="K/N: the work items whose index ≡ K mod N")] = None,
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

    shard_t = None
    if shard is not None:
        try:
            k, n = (int(p) for p in shard.split("/"))
            if not 0 <= k < n:
                raise ValueError
            shard_t = (k, n)
        except ValueError:
            raise _fail(ConfigError(f"--shard must be K/N with 0 <= K < N, got {shard!r}")) from None
    code = _run_one(
        snapshot,
        run_name,
        output_dir,
        server_host=server_host,
        server_port=server_port,
        server_api_key_env=server_api_key_env,
        shard=shard_t,
        resume=resume,
        keep_errors=keep_errors,
        allow_imports=allow_import or (),
    )
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
    from arena.rollout.records import FINAL_STATES, partial_note

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
            name,
            str(st.get("state")),
            f"{st.get('episodes_done', 0)}/{st.get('episodes_total', '?')}",
            str(st.get("successes", 0)),
            str(st.get("errors", 0)),
            f"[yellow]{note}[/]" if note else "",
        )
    out.print(table)
    for name, st in states.items():
        if st.get("pending_reason") and not st.get("error"):
            out.print(f"[yellow]{name}[/]: waiting: {st['pending_reason']}", highlight=False)
        if st.get("error"):
            out.print(f"[red]{name}[/]: {st['error']}", highlight=False)
        for warning in st.get("warnings") or []:
            out.print(f"[yellow]{name}: warning:[/] {warning}", highlight=False)


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
    if states and all(st.get("state") in ("completed", "failed", "cancelled") for st in states.values()):
        out.print(f"nothing to cancel: every run of {output_dir} has finished", highlight=False)
        return
    try:
        cancel_submission(output_dir)
    except ArenaError as exc:
        raise _fail(exc) from None
    out.print(f"cancel requested for {output_dir}", highlight=False)


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
    out.print(f"report: {report}")


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
    out.print(f"report: {path}", highlight=False, soft_wrap=True)


def _require_output_dir(path: Path) -> None:
    """Refuse a directory that is not the output of ``arena run`` (exit 2)."""
    if not path.is_dir() or not ((path / "experiment.yaml").exists() or (path / "manifest.json").exists()):
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
) -> None:
    """Compare two experiments run by run: B − A with its 95% Newcombe interval.

    Runs are matched by name and compared only when their environment (type, task, fields),
    seeds and rollout limits agree (exit 2 naming what differs; --force compares anyway and
    prints the differences first). Exit 3 when a compared run is partial (cancelled, failed,
    still running, episodes missing or error episodes).

    Exit codes:
    0  compared
    2  A or B is not an arena output directory, or compared runs differ (without --force)
    3  a compared run is partial
    """
    from arena.results.compare import compare_experiments, describe_value

    _require_output_dir(a)
    _require_output_dir(b)
    try:
        data = compare_experiments(a, b)
    except FileNotFoundError as exc:
        raise _fail(ConfigError(str(exc))) from None
    if data["same_directory"]:
        raise _fail(ConfigError(f"{a} and {b} are the same output directory: every difference would be 0; give two experiments"))
    if not data["runs"]:
        names_a = ", ".join(data["only_a"]) or "none"
        names_b = ", ".join(data["only_b"]) or "none"
        raise _fail(ConfigError(f"{a} and {b} have no run names in common (A: {names_a}; B: {names_b}); nothing to compare"))
    differences = [
        f"run {run}: {d['key']}: {describe_value(d['a'])} (A) vs {describe_value(d['b'])} (B)"
        for run, diffs in data["differences"].items()
        for d in diffs
    ]
    if differences and not force:
        raise _fail(
            ConfigError(
                "these runs differ in their setup, so their success rates are not comparable:\n  "
                + "\n  ".join(differences)
                + "\n(--force compares them anyway)"
            )
        )
    partial = [f"run {p['run']} in {p['side']}: {p['note']}" for p in data["partial"]]
    code = 3 if partial else 0
    if as_json:
        out.print_json(json.dumps(data))
        for line in partial:
            err.print(f"[yellow]{line}[/]", highlight=False)
        raise typer.Exit(code)

    def pct(v: Optional[float], signed: bool = False) -> str:
        return "-" if v is None else (f"{100 * v:+.1f}%" if signed else f"{100 * v:.1f}%")

    def side(row: dict, x: str) -> str:
        text = f"{row[f'k_{x}']}/{row[f'n_{x}']} {pct(row[f'rate_{x}'])}"
        if row[f"errors_{x}"]:
            text += f" err {row[f'errors_{x}']}"
        if row[f"partial_{x}"]:
            text += f" [yellow]({row[f'partial_{x}']})[/]"
        return text

    if differences:
        out.print("[yellow bold]compared with --force although the runs' setups differ:[/]", highlight=False)
        for line in differences:
            out.print(f"  [yellow]{line}[/]", highlight=False)
    table = Table("run", "task", "A", "B", "B − A", "95% CI (Newcombe)", "paired seeds: only A / only B", title=f"A = {a}   B = {b}")
    for row in data["runs"]:
        ci = row["ci95"]
        mark = "[bold]" if row["significant"] else ""
        end = "[/]" if mark else ""
        paired = row["paired"]
        table.add_row(
            row["run"],
            str(row["task"] or "-"),
            side(row, "a"),
            side(row, "b"),
            f"{mark}{pct(row['difference'], True)}{end}",
            "-" if ci is None else f"{mark}[{pct(ci[0], True)}, {pct(ci[1], True)}]{end}",
            "-" if paired is None else f"{paired['only_a']} / {paired['only_b']} of {paired['seeds']}",
        )
    out.print(table)
    if data["only_a"]:
        out.print(f"only in A: {', '.join(data['only_a'])}", highlight=False)
    if data["only_b"]:
        out.print(f"only in B: {', '.join(data['only_b'])}", highlight=False)
    for row in data["runs"]:
        if row.get("models_differ"):
            out.print(
                f"[yellow]run {row['run']}: the same policy type was served by different models "
                f"({', '.join(row['models_differ'])} differ)[/]",
                highlight=False,
            )
    out.print("bold: the interval excludes 0", style="dim")
    for line in partial:
        err.print(f"[yellow]partial:[/] {line}; its rate covers fewer episodes than planned", highlight=False)
    raise typer.Exit(code)


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
            table.add_row(c.name, f"[{colour.get(c.status, 'white')}]{c.status}[/]", c.detail, c.fix or "")
        out.print(table)
        out.print(f"{len(failed)} problem(s)" if failed else "[green]all checks passed[/]")
    raise typer.Exit(1 if failed else 0)


# -- servers ---------------------------------------------------------------------------------
@app.command()
def serve(
    name: Annotated[str, typer.Argument(help="registered server model (e.g. metaworld-expert) or package.module:factory")],
    host: Annotated[str, typer.Option(help="bind address (0.0.0.0 exposes the server)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port", min=0, max=65535)] = 8000,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="model option KEY=VALUE")] = None,
    api_key_env: Annotated[Optional[str], typer.Option(help="NAME of the variable holding the API key")] = None,
    max_batch_size: Annotated[Optional[int], typer.Option(
        help="requests per infer_batch call (default: 64 for models with infer_batch, else 1; 1 turns batching off)",
        show_default=False, min=1)] = None,
    max_wait_ms: Annotated[float, typer.Option(help="how long the first request of a batch waits for company, ms")] = 2.0,
    max_connections: Annotated[int, typer.Option(
        help="WebSocket connections served at once (runs x num_envs sharing this server); more get HTTP 503",
        min=1)] = 1024,
    handshake_timeout_s: Annotated[float, typer.Option(help="close connections that have not completed the handshake by then, s")] = 10.0,
    inline_below_ms: Annotated[float, typer.Option(
        help="run a request on the event-loop thread while recent inferences took less than this, ms (0: never)",
        min=0)] = 100.0,
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
    from arena.transport.server import PolicyServer

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
    try:
        server = PolicyServer(
            factory(**options), host, port, api_key=api_key, max_batch_size=max_batch_size,
            max_wait_ms=max_wait_ms, max_connections=max_connections,
            handshake_timeout_s=handshake_timeout_s, concurrent_batches=concurrent_batches,
            inline_below_ms=inline_below_ms,
        )
        # Said once the socket is bound (a taken port fails before it), with the real port (--port 0).
        server.run(on_bound=lambda bound: err.print(
            f"serving {name} on ws://{host}:{bound.port} (healthz: http://{host}:{bound.port}/healthz; "
            f"{bound.describe()})", highlight=False,
        ))
    except ArenaError as exc:
        raise _fail(exc) from None
    except OSError as exc:  # e.g. the port is taken
        err.print(f"[bold red]error:[/] cannot serve on {host}:{port}: {exc.strerror or exc}", highlight=False)
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
        err.print(f"not ready: {exc}", highlight=False)
        raise typer.Exit(1) from None
    out.print(f"ready: {kind} {host}:{port}")


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
        manager.registry
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
    if as_json:
        out.print_json(json.dumps(data))
        return
    table = Table("plugin", "distribution", "version", "registered")
    for p in data["plugins"]:
        reg = "; ".join(f"{k}: {', '.join(v)}" for k, v in p["registered"].items())
        table.add_row(p["name"], p["distribution"] or "-", p["version"] or "-", reg or "-")
    out.print(table)
    for b in data["broken"]:  # the traceback is what its author needs; this is where hints send users
        err.print(f"[red]broken plugin[/] {b['name']} ({b['distribution']}): {b['error']}", highlight=False)
        err.print(b["traceback"].rstrip(), style="dim", highlight=False, markup=False)


@plugins_app.command("new")
def plugins_new(
    name: Annotated[str, typer.Argument(help="plugin name, e.g. my-vla (distribution arena-plugin-NAME, import arena_NAME)")],
    directory: Annotated[
        Optional[Path], typer.Option("--dir", help="where to create the package (default ./arena-plugin-NAME)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="write into an existing non-empty directory")] = False,
) -> None:
    """Create a plugin package: policy, adapter, server task, servable model, tests and README.

    Exit codes:
    0  created
    2  an invalid name, or the directory exists and is not empty (without --force)
    """
    from arena.scaffold import create_plugin

    try:
        created = create_plugin(name, directory, force=force)
    except ArenaError as exc:
        raise _fail(exc) from None
    out.print(f"created {created.root} ({len(created.files)} files)", highlight=False, soft_wrap=True)
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
        err.print(f"[bold red]error:[/] {exc}")
        sys.exit(2)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
