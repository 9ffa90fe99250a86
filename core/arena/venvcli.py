"""``arena venv setup [NAME...]``, and the ``arena NAME setup`` alias of each declared venv
(parsing and printing only; the work is :func:`arena.venvs.setup_venvs`).

Both print the same way: each ready venv's interpreter on stdout, one per line; progress and
problems on stderr as ``<command>: NAME: ...``. Exit codes: 0 every venv is ready (or skipped
with ``--if-possible`` because no interpreter satisfies its Python requirement); 2 a name or
option that no declaration knows; 3 a venv could not be created or updated.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Optional

import typer

from arena.venvs import VenvSpec

app = typer.Typer(name="venv", no_args_is_help=True, help="Benchmark and model venvs the environments and servable models declare: set them up.")

PythonOpt = Annotated[
    Optional[str], typer.Option("--python", help="base interpreter (default: found from the venv's Python requirement)")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="print only the interpreters' paths (and problems)")]
JobsOpt = Annotated[
    int, typer.Option("--jobs", "-j", min=1, help="venvs set up at a time (their downloads overlap)")
]
IfPossibleOpt = Annotated[
    bool, typer.Option("--if-possible", help="exit 0, saying why, for a venv whose Python is not on this machine")
]


@app.command("setup")
def setup(
    names: Annotated[Optional[list[str]], typer.Argument(help="venvs to set up; none: every declared venv")] = None,
    python: PythonOpt = None,
    quiet: QuietOpt = False,
    if_possible: IfPossibleOpt = False,
    with_options: Annotated[
        Optional[list[str]], typer.Option("--with", metavar="OPTION", help="a set-up option the venv declares; repeatable")
    ] = None,
    jobs: JobsOpt = 1,
) -> None:
    """Create or update benchmark venvs (where: `arena doctor`, "benchmark venvs"); print their interpreters.

    Idempotent: nothing is installed when a venv is up to date. Each venv is what an environment or servable model declares (arena.venvs.VenvSpec): arena-core, the plugin, the pinned requirements of its benchmark or model.

    Exit codes:
    0  every venv is ready (or skipped with --if-possible)
    2  an unknown venv name or option
    3  a venv could not be created or updated
    """
    from arena.venvs import VenvError, declared_venvs

    try:
        declared = declared_venvs()
    except VenvError as exc:
        typer.echo(f"arena venv setup: {exc}", err=True)
        raise typer.Exit(2) from None
    wanted = list(dict.fromkeys(names or declared))
    unknown = [n for n in wanted if n not in declared]
    if unknown:
        known = ", ".join(declared) or "none (no installed environment or servable model declares one)"
        typer.echo(f"arena venv setup: no declared venv named {', '.join(unknown)} (declared: {known})", err=True)
        raise typer.Exit(2)
    run_setup("arena venv setup", [declared[n][0] for n in wanted], python, quiet, if_possible, with_options or [], jobs)


def run_setup(
    command: str, specs: list[VenvSpec], python: str | None, quiet: bool, if_possible: bool, options: list[str], jobs: int = 1
) -> None:
    """Set up ``specs`` and print the outcome (module docstring); exits 2 or 3 on a problem."""
    from arena.venvs import setup_venvs

    for spec in specs:
        unknown = [o for o in options if o not in spec.options]
        if unknown:
            typer.echo(f"{command}: {spec.name}: no set-up option {', '.join(unknown)} (options: {', '.join(spec.options) or 'none'})", err=True)
            raise typer.Exit(2)

    def say(text: str) -> None:
        typer.echo(f"{command}: {text}", err=True)

    results = setup_venvs(specs, python=python, options=options, quiet=quiet, if_possible=if_possible, say=say, jobs=jobs)
    failed = False
    for spec, path, problem in results:
        if path is not None:
            typer.echo(str(path))
        elif problem is not None and problem.startswith("skipped:"):
            say(f"{spec.name}: {problem}")
        else:
            failed = True
            say(f"{spec.name}: {problem}")
    if failed:
        raise typer.Exit(3)


def setup_alias(spec: VenvSpec) -> Any:
    """A typer command function: ``arena NAME setup``, the alias of ``arena venv setup NAME``
    with ``--python``, ``--quiet``, ``--if-possible`` and one ``--OPTION`` flag per declared
    set-up option. A plugin adds it to its command group: ``group.command("setup")(setup_alias(VENV))``."""

    def alias(python: PythonOpt = None, quiet: QuietOpt = False, if_possible: IfPossibleOpt = False, **flags: bool) -> None:
        run_setup(f"arena {spec.name} setup", [spec], python, quiet, if_possible, [o for o in spec.options if flags.get(_param(o))])

    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter("python", keyword, default=None, annotation=PythonOpt),
        inspect.Parameter("quiet", keyword, default=False, annotation=QuietOpt),
        inspect.Parameter("if_possible", keyword, default=False, annotation=IfPossibleOpt),
    ]
    for option, help_text in spec.options.items():
        params.append(
            inspect.Parameter(
                _param(option),
                keyword,
                default=False,
                annotation=Annotated[bool, typer.Option(f"--{option}", help=help_text)],
            )
        )
    alias.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    summary = f" ({spec.summary})" if spec.summary else ""
    alias.__doc__ = (
        f"Create or update the {spec.name} venv{summary}; print its interpreter.\n\n"
        f"The same as `arena venv setup {spec.name}`. Idempotent: nothing is installed when it is up to date.\n\n"
        "Exit codes:\n0  the venv is ready (or skipped with --if-possible)\n2  an unknown option\n3  it could not be created or updated"
    )
    alias.__name__ = "setup"
    return alias


def alias_app(spec: VenvSpec, help_text: str | None = None) -> typer.Typer:
    """A command group ``arena NAME`` holding only ``setup`` (:func:`setup_alias`), for a plugin
    whose group has no other commands: ``app.add_typer(alias_app(VENV), name=VENV.name)``."""
    group = typer.Typer(name=spec.name, no_args_is_help=True, help=help_text or f"The {spec.name} benchmark: its venv.")
    group.command("setup")(setup_alias(spec))
    return group


def _param(option: str) -> str:
    return "opt_" + option.replace("-", "_")
