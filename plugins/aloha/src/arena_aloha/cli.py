"""``arena aloha``: set up the ALOHA sim venv (parsing and printing only)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

app = typer.Typer(name="aloha", no_args_is_help=True, help="The ALOHA sim benchmark (gym-aloha): its venv.")


@app.command()
def setup(
    python: Annotated[Optional[str], typer.Option(help="base interpreter of the venv (default: this one)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print only the interpreter's path")] = False,
) -> None:
    """Create or update the ALOHA sim venv ($ARENA_VENVS/aloha); print its interpreter.

    Idempotent: nothing runs when it is up to date. The first time installs ~650 MB (gym-aloha,
    dm_control, MuJoCo 3.8) from the package index.
    """
    from arena.venvs import VenvError

    from arena_aloha.venv import ensure_aloha_venv

    try:
        path = ensure_aloha_venv(python=python, quiet=quiet)
    except VenvError as exc:
        typer.echo(f"arena aloha setup: {exc}", err=True)
        raise typer.Exit(3) from None
    typer.echo(str(path))
