"""``arena libero``: set up the LIBERO venv and list suites and tasks (parsing and printing only)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

app = typer.Typer(name="libero", no_args_is_help=True, help="The LIBERO benchmark: its venv, suites and tasks.")


@app.command()
def setup(
    python: Annotated[Optional[str], typer.Option(help="base interpreter of the venv (default: this one)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print only the interpreter's path")] = False,
) -> None:
    """Create or update the LIBERO venv ($ARENA_VENVS/libero); print its interpreter.

    Idempotent: nothing runs when it is up to date. The first time installs ~2 GB (LIBERO's
    assets, robosuite, MuJoCo) from the package index.
    """
    from arena.venvs import VenvError

    from arena_libero.venv import ensure_libero_venv

    try:
        path = ensure_libero_venv(python=python, quiet=quiet)
    except VenvError as exc:
        typer.echo(f"arena libero setup: {exc}", err=True)
        raise typer.Exit(3) from None
    typer.echo(str(path))


@app.command("tasks")
def list_tasks(
    suite: Annotated[Optional[str], typer.Argument(help="a suite; none: list the suites")] = None,
) -> None:
    """List the suites (with task counts and step limits), or the tasks of one suite."""
    from arena_libero import catalog

    if suite is None:
        for name in catalog.suites():
            typer.echo(f"{name}\t{len(catalog.tasks(name))} tasks\t{catalog.step_limit(name)} steps")
        return
    try:
        listed = catalog.tasks(suite)
    except ValueError as exc:
        typer.echo(f"arena libero tasks: {exc}", err=True)
        raise typer.Exit(2) from None
    for task in listed:
        typer.echo(f"{task.index}\t{task.name}\t{task.language}")
