"""docker/runner.Dockerfile, read as text (no docker here): the runner image sets up every
benchmark venv its Python can hold, names the ones it leaves out, and says what OSMO runs in
it; arena.launch.runner_image (what dry-runs quote) describes the same image."""

from __future__ import annotations

import re
from pathlib import Path

from arena.launch import runner_image
from arena.venvs import declared_venvs

DOCKERFILE = Path(__file__).resolve().parents[2] / runner_image.DOCKERFILE
TEXT = DOCKERFILE.read_text()


def _built_venvs() -> tuple[str, ...]:
    (default,) = re.findall(r'^ARG ARENA_RUNNER_VENVS="([^"]*)"$', TEXT, re.M)
    assert re.search(r"^RUN arena venv setup \$ARENA_RUNNER_VENVS$", TEXT, re.M), "the ARG is not what it sets up"
    return tuple(default.split())


def test_the_image_sets_up_every_venv_its_python_can_hold_and_names_the_others():
    (python,) = re.findall(r"^FROM python:(\d+\.\d+)-slim$", TEXT, re.M)
    assert python == runner_image.PYTHON
    assert _built_venvs() == runner_image.VENVS
    assert re.search(r"^ENV (.|\n)*ARENA_VENVS=/opt/arena/venvs", TEXT, re.M)  # where run-one looks for them
    declared = declared_venvs()
    holdable = {name for name, (spec, _) in declared.items() if spec.accepts(f"{python}.0")}
    assert holdable == set(runner_image.VENVS), "build every venv Python 3.11 can hold (or list why not)"
    left_out = " ".join(line for line in TEXT.splitlines() if line.startswith("# Not in this image:") or "need Python" in line)
    for name in set(declared) - holdable:
        assert name in left_out, f"the header does not name venv {name!r}, which the image lacks"


def test_the_header_says_osmo_runs_arena_node_not_run_one():
    header = "\n".join(line for line in TEXT.splitlines() if line.startswith("#"))
    assert "`arena node`" in header and "OSMO runs `arena run-one`" not in header
    assert "runner_failure" not in TEXT and "arena probe" not in header  # modules and commands that no longer exist


def test_a_dry_run_can_name_the_runs_the_image_cannot_run():
    from arena.config import load_experiment_dict

    runs = {
        "bridge": {"environment": {"type": "lerobot_env", "env": {"type": "pusht"}}, "policy": {"type": "zero_action"}},
        "reach": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}},
    }
    exp = load_experiment_dict({"runs": runs}, source="x.yaml", check_requires=False)
    assert runner_image.runs_it_cannot_run(exp) == {"lerobot": ["bridge"]}
    (note,) = runner_image.notes(exp, "launch.osmo.runner_image")
    assert note.startswith("run bridge: an image built from docker/runner.Dockerfile has no venv 'lerobot'")
    assert "`arena venv setup lerobot`" in note and "launch.osmo.runner_image" in note
