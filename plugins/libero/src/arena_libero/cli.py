"""``arena libero``: list suites and tasks, and ``setup`` (the alias of ``arena venv setup
libero``, generated from the venv's declaration); parsing and printing only."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from arena.venvcli import setup_alias
from arena_libero.venv import VENV

app = typer.Typer(name="libero", no_args_is_help=True, help="The LIBERO benchmark: its venv, suites and tasks.")
app.command("setup")(setup_alias(VENV))


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
