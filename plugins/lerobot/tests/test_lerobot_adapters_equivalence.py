"""Each LeRobot adapter + ``to_policy_batch`` gives the tensors LeRobot's own processing gives.

The same raw simulator observation goes (a) through arena's environment (its Arena layout),
the adapter and :func:`arena_lerobot.features.to_policy_batch`, and (b) through what
``lerobot-eval`` (LeRobot 0.6.1) does with it: its env wrapper's formatting, the vector env's
stacking, ``preprocess_observation``, its task lookup (``env.call("task_description")``, else
``"task"``, else ``""``) and its env preprocessor
(``LiberoProcessorStep`` for LIBERO). Both (a) and (b) run in the ``lerobot`` model venv
(``lerobot_reference.py``); the simulator runs where it is installed
(``equivalence_sources.py``: ALOHA and LIBERO in their benchmark venvs, Meta-World in arena's
interpreter); PushT runs LeRobot's own gym-pusht vector env (``make_env``) in the model venv.
The recordings travel as codec frames (:mod:`arena.testing.frames`, no pickle).

Every tensor is bit-exact except LIBERO's axis-angle (``observation.state[3:6]``), within
2 ulp (:func:`arena_lerobot.adapters.libero_state` says why).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from arena.testing.frames import read_frame
from arena.testing.venvs import benchmark_python

HERE = Path(__file__).resolve().parent
LEROBOT_SETUP = "arena venv setup lerobot"


def lerobot_python() -> Path:
    """The ``lerobot`` model venv's interpreter, or a skip (a failure under CI) naming its set-up."""
    from arena.venvs import declared_venvs, venv_python

    if "lerobot" in declared_venvs():
        return benchmark_python("lerobot", LEROBOT_SETUP)
    python = venv_python("lerobot")
    if not python.exists():
        message = f"the lerobot venv ({python}) does not exist: run `{LEROBOT_SETUP}`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return python


def _run(python: Path | str, *args: str, timeout: int = 600) -> None:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa"), "SDL_VIDEODRIVER": "dummy",
           "PYOPENGL_PLATFORM": os.environ.get("PYOPENGL_PLATFORM", "osmesa")}
    done = subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stderr[-4000:]}"


def record(tmp_path: Path, python: Path | str, benchmark: str) -> str:
    out = tmp_path / f"{benchmark}.frames"
    _run(python, str(HERE / "equivalence_sources.py"), benchmark, str(out))
    return str(out)


def assert_bit_exact(report: dict[str, Any], keys: set[str], *, close: dict[str, tuple[slice, int]] | None = None) -> None:
    """Every step compares exactly ``keys``, each with the same shape and dtype on both sides and
    equal values; a key of ``close`` may differ by at most ``ulp`` in its columns ``slice``."""
    close = close or {}
    assert report["steps"]
    for step in report["steps"]:
        assert set(step["keys"]) == keys, step["keys"]
        for key, entry in step["keys"].items():
            assert entry["shape_a"] == entry["shape_b"] and entry["dtype_a"] == entry["dtype_b"] == "torch.float32", (key, entry)
            if key in close and not entry["equal"]:
                columns, ulp = close[key]
                per_column = entry["ulp_per_column"]
                outside = [c for i, c in enumerate(per_column) if i not in range(*columns.indices(len(per_column)))]
                assert max(outside) == 0 and max(per_column[columns]) <= ulp, (key, per_column)
            else:
                assert entry["equal"], (key, entry)
    for task in report["tasks"]:
        assert task["a"] == task["b"]


#: The recordings made in a benchmark venv: source -> (venv, its set-up command, the test that needs it).
VENV_SOURCES = {
    "aloha": ("aloha", "arena aloha setup", "test_aloha_equals_lerobots_gym_aloha_env"),
    "libero": ("libero", "arena libero setup", "test_libero_equals_lerobots_libero_env_and_processor"),
}


@pytest.fixture(scope="module")
def reports(request, tmp_path_factory) -> dict[str, Any]:
    """The reports on PushT, on a Meta-World recording (where arena's interpreter has
    Meta-World) and on the ALOHA and LIBERO recordings (where their venvs are and their tests
    were selected), from one ``lerobot_reference.py`` process (one LeRobot import). A source
    whose recording or report failed maps to that error's text, which its own test raises
    (:func:`_report`); a missing venv is left to the test's own ``benchmark_python``."""
    root = tmp_path_factory.mktemp("equivalence")
    selected = {item.originalname for item in request.session.items}
    sources: dict[str, str] = {"pusht": "pusht"}
    failed: dict[str, str] = {}
    recordings = {}
    if importlib.util.find_spec("metaworld") is not None:
        recordings["metaworld"] = sys.executable
    for name, (venv, setup, test) in VENV_SOURCES.items():
        if test in selected:
            try:
                recordings[name] = benchmark_python(venv, setup)
            except (pytest.skip.Exception, pytest.fail.Exception):
                continue
    for name, python in recordings.items():
        try:
            sources[name] = record(root, python, name)
        except AssertionError as error:
            failed[name] = str(error)
    outs = {name: root / f"{name}.report.frames" for name in sources}
    try:  # in order: a source whose comparison raises leaves the ones before it written
        _run(lerobot_python(), str(HERE / "lerobot_reference.py"), *[str(x) for n in sources for x in (sources[n], outs[n])])
    except AssertionError as error:
        failed.update({name: str(error) for name, out in outs.items() if not out.exists()})
    reports: dict[str, Any] = dict(failed)
    for name, out in outs.items():
        if out.exists():
            with out.open("rb") as f:
                reports[name] = read_frame(f)
    return reports


def _report(reports: dict[str, Any], name: str) -> dict[str, Any]:
    """Source ``name``'s report; fails with its recording's or comparison's error."""
    report = reports[name]
    if isinstance(report, str):
        pytest.fail(report)
    return report


def test_pusht_equals_lerobots_own_gym_pusht_env(reports):
    report = _report(reports, "pusht")
    types = {s["obs_type"] for s in report["steps"]}
    assert types == {"pixels_agent_pos", "environment_state_agent_pos"}
    for obs_type, keys in [("pixels_agent_pos", {"observation.image", "observation.state"}),
                           ("environment_state_agent_pos", {"observation.environment_state", "observation.state"})]:
        assert_bit_exact({**report, "steps": [s for s in report["steps"] if s["obs_type"] == obs_type]}, keys)
    assert report["tasks"][0]["b"] == ["", ""]


def test_metaworld_equals_lerobots_metaworld_env(reports):
    pytest.importorskip("metaworld")
    report = _report(reports, "metaworld")
    assert_bit_exact(report, {"observation.image", "observation.state", "observation.environment_state"})
    assert report["tasks"][0]["b"] == ["Push the puck to a goal"] * 2
    from arena_lerobot.adapters import LEROBOT_METAWORLD_TASKS

    assert report["metaworld_tasks"] == LEROBOT_METAWORLD_TASKS


@pytest.mark.slow
def test_aloha_equals_lerobots_gym_aloha_env(reports):
    benchmark_python("aloha", "arena aloha setup")  # skips (under CI: fails) without the venv
    report = _report(reports, "aloha")
    assert_bit_exact(report, {"observation.images.top", "observation.state"})
    # lerobot-eval 0.6.1: env.call("task") reaches gym-aloha's task attribute through the wrappers
    assert report["tasks"][0]["b"] == ["transfer_cube", "transfer_cube"]


@pytest.mark.slow
def test_libero_equals_lerobots_libero_env_and_processor(reports):
    benchmark_python("libero", "arena libero setup")  # skips (under CI: fails) without the venv
    report = _report(reports, "libero")
    assert_bit_exact(report, {"observation.images.image", "observation.images.image2", "observation.state"},
                     close={"observation.state": (slice(3, 6), 2)})
    assert report["tasks"][0]["b"][0].startswith("pick up the black bowl")


REFUSALS = r'''
import numpy as np
from arena_lerobot.features import to_policy_batch

img, st = np.zeros((8, 10, 3), np.uint8), np.zeros(2, np.float32)
ok = to_policy_batch([{"observation.image": img, "observation.state": st, "arena.env_id": 3}])
assert sorted(ok) == ["observation.image", "observation.state", "task"] and ok["task"] == [""], sorted(ok)
assert tuple(ok["observation.image"].shape) == (1, 3, 8, 10) and ok["observation.image"].is_contiguous()
cases = [
    ([], "at least one request"),
    ([{"task": "x"}], "no observation"),
    ([{"observation.state": st}, {"observation.state": st, "observation.image": img}], "request 1 has observation keys"),
    ([{"observation.state": st}, {"observation.state": np.zeros(3)}], "different shapes"),
    ([{"observation.image": img.astype(np.float32)}], "must be uint8"),
    ([{"observation.images.top": np.zeros((3, 8, 10), np.uint8)}], "channel-last"),
    ([{"observation.state": np.zeros((2, 2))}], "1-D array"),
    ([{"observation.state": st, "task": 1}], "'task' must be a str"),
]
for requests, message in cases:
    try:
        to_policy_batch(requests)
    except ValueError as exc:
        assert message in str(exc), (message, str(exc))
    else:
        raise AssertionError(f"no ValueError for {message}")
print("REFUSED", len(cases))
'''


def test_to_policy_batch_drops_other_keys_and_refuses_what_lerobot_would_not_take():
    done = subprocess.run([str(lerobot_python()), "-c", REFUSALS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REFUSED 8" in done.stdout
