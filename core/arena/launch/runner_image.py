"""What the runner image built from ``docker/runner.Dockerfile`` can run, so a dry-run can say
which runs it cannot.

The image is Python :data:`PYTHON` with arena, every plugin and backend package, and the
benchmark venvs :data:`VENVS` (``arena venv setup NAME``; the environments whose workers run
in their own interpreter need one). A declared venv whose Python requirement the image's
Python does not satisfy (Isaac Lab's and LeRobot's want 3.12) is not built, and a run whose
environment needs it fails in that image. ``tests/launch/test_runner_image.py`` reads the
Dockerfile and checks that it builds exactly these venvs on this Python, and that its header
names every declared venv it leaves out.

Launch backends call :func:`runs_it_cannot_run` only where the image is (or defaults to) that
one: OSMO always runs the runner in ``launch.osmo.runner_image``; Slurm only with
``launch.slurm.runner_image``. An image built otherwise may hold more: the note says
"built from docker/runner.Dockerfile".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arena.launch.wording import run_list

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment

__all__ = ["DOCKERFILE", "PYTHON", "VENVS", "runs_it_cannot_run", "notes"]

#: The Dockerfile, relative to the repository root.
DOCKERFILE = "docker/runner.Dockerfile"
#: The image's Python (``FROM python:<PYTHON>-slim``).
PYTHON = "3.11"
#: The benchmark venvs it sets up (its ``ARENA_RUNNER_VENVS`` build argument's default).
VENVS: tuple[str, ...] = ("aloha", "kinetix", "libero", "maniskill", "pusht")


def runs_it_cannot_run(experiment: ResolvedExperiment) -> dict[str, list[str]]:
    """``{venv: [runs]}``: the runs whose environment's workers need a benchmark venv the image
    lacks (the environment's class declares it, :func:`arena.envs.workers.layout.declared_venv_name`,
    and the run sets no ``environment.python``), in run order."""
    from arena.envs.workers.layout import declared_venv_name

    missing: dict[str, list[str]] = {}
    for name, run in experiment.runs.items():
        config = run.environment
        if getattr(config, "python", None):
            continue
        try:
            venv = declared_venv_name(run.environment_cls, config)
        except ValueError:
            continue  # arena validate reports a malformed declaration
        if venv and venv not in VENVS:
            missing.setdefault(venv, []).append(name)
    return missing


def notes(experiment: ResolvedExperiment, image_key: str) -> list[str]:
    """Dry-run lines naming, per missing venv, the runs the image cannot run and what to do
    (``image_key``: the option that names the image, e.g. ``launch.osmo.runner_image``);
    ``[]`` when it can run them all."""
    from arena.venvs import declared_venvs

    declared = declared_venvs()
    lines = []
    for venv, runs in runs_it_cannot_run(experiment).items():
        spec = declared.get(venv, (None, []))[0]
        why = f" (it needs Python {spec.python}, the image has {PYTHON})" if spec is not None and spec.python else ""
        lines.append(
            f"{run_list(runs)}: an image built from {DOCKERFILE} has no venv {venv!r}{why}; set {image_key} to an "
            f"image that ran `arena venv setup {venv}` (ARENA_VENVS pointing at it)"
        )
    return lines
