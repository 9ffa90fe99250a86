"""``arena export lerobot OUTPUT_DIR --run NAME --to DIR``: the command line of
:mod:`arena_lerobot.export`.

It checks the run, its recorded episodes and the target in arena's own interpreter (exit 2
with the reason), then writes the dataset: in this interpreter when LeRobot is importable,
else under the interpreter of the ``lerobot`` model venv (:func:`arena.venvs.venv_python`),
which holds LeRobot, arena-core and this plugin; without that venv it names the command that
makes it. Exit codes: 0 written; 2 a wrong run, target, option, adapter, or no venv; 3 LeRobot
failed to write (the half-written directory is removed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

#: The model venv that holds LeRobot (declared by the plugin's server task: ``arena venv setup lerobot``).
MODEL_VENV = "lerobot"


def export_lerobot(
    output_dir: Annotated[Path, typer.Argument(help="the output directory of an arena run")],
    run: Annotated[str, typer.Option("--run", help="the run whose recorded episodes are exported")],
    to: Annotated[Path, typer.Option("--to", help="the dataset directory to create (must not exist)")],
    failed_only: Annotated[bool, typer.Option("--failed-only", help="only episodes whose outcome is failure or timeout")] = False,
    repo_id: Annotated[Optional[str], typer.Option("--repo-id", help="the dataset's repo_id (default local/<run>)")] = None,
    adapter: Annotated[
        Optional[str],
        typer.Option("--adapter", help="lerobot/<embodiment> or module:Class (default: the run's, else by environment type)"),
    ] = None,
    videos: Annotated[
        Optional[bool],
        typer.Option("--videos/--no-videos", help="camera features as videos (default: when the run recorded videos)"),
    ] = None,
    fps: Annotated[Optional[int], typer.Option("--fps", help="frames per second (default: LeRobot's for the embodiment)")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress lines on stderr")] = False,
) -> None:
    """Write a run's recorded episodes (trajectories.enabled) as a LeRobotDataset v3 that LeRobotDataset(repo_id, root=DIR) loads offline.

    Observations go through the run's LeRobot embodiment adapter, so a policy trained on the dataset is served with the same adapter. Per-episode seed and outcome: DIR/meta/arena_episodes.jsonl. Prints a JSON summary on stdout.

    Exit codes:
    0  written
    2  no such run, no recorded episodes, DIR exists, an unknown adapter, camera frames the video encoder cannot take (--videos), or no lerobot venv
    3  LeRobot failed to write the dataset, or its process died (e.g. the encoder crashed); nothing is left at DIR
    """
    from arena_lerobot.export import ExportError, lerobot_importable, plan_export, run_export

    try:
        plan_export(output_dir, run, to, repo_id=repo_id, adapter=adapter, failed_only=failed_only, videos=videos, fps=fps)
    except ExportError as exc:
        typer.echo(f"arena export lerobot: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    argv = [str(output_dir), "--run", run, "--to", str(to)]
    argv += ["--failed-only"] if failed_only else []
    argv += ["--repo-id", repo_id] if repo_id else []
    argv += ["--adapter", adapter] if adapter else []
    argv += [] if videos is None else ["--videos" if videos else "--no-videos"]
    argv += ["--fps", str(fps)] if fps else []
    argv += ["--quiet"] if quiet else []
    if lerobot_importable():
        raise typer.Exit(run_export(argv))
    from arena.venvs import venv_python

    python = venv_python(MODEL_VENV)
    if not python.exists():
        typer.echo(
            f"arena export lerobot: needs LeRobot, which is not importable here and lives in the {MODEL_VENV} venv "
            f"({python.parent.parent}, not there): create it with `arena venv setup {MODEL_VENV}`",
            err=True,
        )
        raise typer.Exit(2)
    sys.stdout.flush()
    code = subprocess.call([str(python), "-m", "arena_lerobot.export", *argv])
    if code != 0:
        from arena_lerobot.export import EXIT_FAILED, remove_staging

        removed = remove_staging(to)  # what a process that died natively could not remove itself
        if code < 0 or code > 3:
            how = _signal_name(-code) if code < 0 else f"exit status {code}"
            typer.echo(
                f"arena export lerobot: the LeRobot export process died ({how}) while writing {to}; "
                + ("its partial dataset was removed" if removed else "it had written nothing")
                + " (a video encoder crash: see --no-videos)",
                err=True,
            )
            code = EXIT_FAILED
    raise typer.Exit(code)


def _signal_name(number: int) -> str:
    import signal

    try:
        return f"signal {signal.Signals(number).name}"
    except ValueError:
        return f"signal {number}"
