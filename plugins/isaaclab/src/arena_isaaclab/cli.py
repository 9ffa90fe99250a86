"""``arena isaaclab ...``: set up and inspect the Isaac Lab venv."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

app = typer.Typer(name="isaaclab", no_args_is_help=True)


@app.callback()
def main() -> None:
    """Isaac Lab environments: the Python 3.12 venv the simulator runs in."""


@app.command("setup")
def setup_command(
    python: Annotated[Optional[str], typer.Option("--python", help="Python 3.12 interpreter to build the venv from (default: found)")] = None,
    full: Annotated[bool, typer.Option("--full", help="install Isaac Lab with all its dependencies (7.8 GB), not the kit-less set")] = False,
    if_possible: Annotated[bool, typer.Option("--if-possible", help="exit 0, saying why, when there is no Python 3.12")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Create (or update) the venv Isaac Lab runs in: $ARENA_VENVS/isaaclab."""
    from arena.venvs import VenvError
    from arena_isaaclab import setup

    if if_possible and python is None and setup.find_python312() is None:
        typer.echo("arena isaaclab setup: skipped: no Python 3.12 on this machine (Isaac Lab 3 needs it)", err=True)
        return
    began = time.monotonic()
    if quiet and setup.existing() is None:
        typer.echo("arena isaaclab setup: creating the Isaac Lab venv (first time: several minutes, ~5 GB)", err=True)
    try:
        interpreter = setup.setup(python, full=full, quiet=quiet)
    except VenvError as exc:
        typer.echo(f"ERROR: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"Isaac Lab venv ready: {interpreter} ({time.monotonic() - began:.0f} s)")
