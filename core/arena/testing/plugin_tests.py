"""Helpers the plugins' tests share: peer reference code that no installed package provides,
and the checks every plugin's tests make of how arena lists and requires it.

- :func:`robosuite_quat2axisangle`: robosuite's ``transform_utils.quat2axisangle`` as written
  (it modifies its argument), the reference that openpi's LIBERO example, OpenVLA-OFT's LIBERO
  client and vla-eval's LIBERO benchmark copy; :func:`arena.rotations.quat_to_axis_angle` is
  checked bit for bit against it.
- :func:`record_expert_actions`: a scripted expert's actions from given seeds, recorded in a
  benchmark venv's interpreter (the reference side of the plugins' peer-client tests).
- :class:`RawSimulator`: the calling side of :func:`arena.testing.frames.serve_calls`, a plain
  simulator served from a benchmark venv to a reference client's loop.
- :func:`traced_episodes` and :func:`assert_same_steps`: episodes of a traced environment's
  trace file, compared step for step with a reference client's.
- :func:`run_arena` (from :mod:`arena.testing.experiments`): the ``arena`` command in a fresh
  interpreter (:data:`OSMESA` for MuJoCo without a display).
- :func:`arena_run`: ``arena run`` on an experiment given as a dict;
  :func:`experiment_against` builds one whose policy talks to a server the test started.
- :func:`listed_plugin`: one plugin's entry of ``arena plugins --json``.
- :func:`refused_by_validate`: ``arena validate`` refuses an experiment; its message, flattened.
- :func:`without_distribution`: make ``requires:`` see one distribution as not installed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import numpy as np
import pytest

from arena.testing.experiments import run_arena, run_in_child
from arena.testing.frames import read_frame, write_frame

__all__ = [
    "OSMESA", "RawSimulator", "arena_run", "assert_same_steps", "experiment_against", "listed_plugin", "record_expert_actions", "refused_by_validate",
    "robosuite_quat2axisangle", "run_arena", "traced_episodes", "without_distribution",
]

#: MuJoCo (and PyOpenGL) render with OSMesa: no display, no GPU needed.
OSMESA = {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}


def robosuite_quat2axisangle(quat: np.ndarray) -> np.ndarray:
    """robosuite ``utils/transform_utils.py`` ``quat2axisangle``, statement for statement:
    openpi ``examples/libero/main.py`` ``_quat2axisangle`` (199-214 at 15a9616) and OFT
    ``experiments/robot/libero/libero_utils.py`` ``quat2axisangle`` (l.63-86) are copies of it.
    Clips ``quat[3]`` in place, as the original does: pass a copy."""
    if quat[3] > 1.0:
        quat[3] = 1.0
    elif quat[3] < -1.0:
        quat[3] = -1.0
    den = np.sqrt(1.0 - quat[3] * quat[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (quat[:3] * 2.0 * math.acos(quat[3])) / den


class RawSimulator:
    """A plain simulator in another interpreter, called as ``sim("method", *args)``: runs
    ``python -m module`` (a module whose main is :func:`arena.testing.frames.serve_calls`, e.g.
    ``arena_libero.testing`` under the LIBERO venv) and exchanges codec frames with it over
    stdin/stdout (no pickle). ``label`` names the simulator in errors; ``env`` adds environment
    variables; as a context manager it is closed on leaving. Returned arrays are writable (a reference loop may write into observations, as
    openpi's examples do).
    """

    def __init__(self, python: Path, module: str, label: str, env: dict[str, str] | None = None) -> None:
        self.label = label
        self.proc = subprocess.Popen(
            [str(python), "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )

    def __call__(self, method: str, *args: Any) -> Any:
        """The result of ``method(*args)`` there.

        Raises:
            RuntimeError: the call failed there (its message names ``label`` and ``method``).
        """
        write_frame(self.proc.stdin, [method, list(args)])
        status, result = read_frame(self.proc.stdout, writable=True)
        if status != "ok":
            raise RuntimeError(f"{self.label} {method}: {result}")
        return result

    def close(self) -> None:
        """Call ``close`` there and wait (60 s at most) for the process to end; one still running
        then is killed (it is this object's own child), so a test never leaves it behind."""
        try:
            self("close")
        finally:
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> RawSimulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def traced_episodes(trace: Iterable[dict[str, Any]], keep: tuple[str, ...]) -> list[dict[str, Any]]:
    """The episodes of one env's trace file (a traced environment's ``{"op": "reset", "state",
    ...}`` and ``{"op": "step", "action", "state", ...}`` entries, in order): per reset, the
    entry's ``keep`` keys, ``start`` (its state) and the ``actions`` and ``states`` of the steps
    after it."""
    episodes: list[dict[str, Any]] = []
    for entry in trace:
        if entry["op"] == "reset":
            episodes.append({**{k: entry[k] for k in keep}, "start": entry["state"], "actions": [], "states": []})
        else:
            episodes[-1]["actions"].append(entry["action"])
            episodes[-1]["states"].append(entry["state"])
    return episodes


def assert_same_steps(ours: dict[str, Any], theirs: dict[str, Any], where: str) -> None:
    """Two episodes (:func:`traced_episodes`' layout) are the same to the bit: the state at the
    start, every applied action (``float64``, as many) and every state after a step.

    Raises:
        AssertionError: the first difference, with ``where`` and the step.
    """
    assert ours["start"].tobytes() == theirs["start"].tobytes(), f"{where}: state at the start"
    assert len(ours["actions"]) == len(theirs["actions"]), f"{where}: number of steps"
    for t, (x, y) in enumerate(zip(ours["actions"], theirs["actions"])):
        assert x.dtype == y.dtype == np.float64 and x.tobytes() == y.tobytes(), f"{where}, step {t}: action"
    for t, (x, y) in enumerate(zip(ours["states"], theirs["states"])):
        assert x.tobytes() == y.tobytes(), f"{where}, step {t}: state"


_EXPERT_ROLLOUT = """
import sys
import numpy as np

out, steps, seeds = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3:]]
actions = {}
for seed in seeds:
    obs = env.reset_envs([0], [seed])
    reset_expert(seed)
    rows = []
    for _ in range(steps):
        a = expert.get_action(env, obs)
        rows.append(np.asarray(a[0], np.float64))
        obs = env.step(a)[0]
    actions[str(seed)] = np.stack(rows)
env.close()
np.savez(out, **actions)
"""


def record_expert_actions(
    python: Path, setup: str, seeds: list[int], steps: int, out: Path, *,
    env: dict[str, str] | None = None, timeout: float = 900.0,
) -> dict[int, np.ndarray]:
    """A scripted expert's actions, ``{seed: float64 (steps, action_dim)}``, recorded by
    ``python`` (a benchmark venv's interpreter, which has the simulator arena's has not).

    ``setup`` is Python source run there first; it defines ``env`` (an arena environment with
    one env), ``expert`` (a policy: ``get_action(env, obs)``) and ``reset_expert(seed)``. For
    each seed the env is reset with it, ``reset_expert(seed)`` is called, and the expert steps
    ``steps`` times. ``out`` is the ``.npz`` file the actions travel through; ``env`` adds
    environment variables.

    Raises:
        AssertionError: the interpreter exits with an error (its stderr's end is the message).
    """
    done = subprocess.run(
        [str(python), "-c", setup + _EXPERT_ROLLOUT, str(out), str(steps), *map(str, seeds)],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as data:
        return {int(k): data[k] for k in data.files}


def arena_run(
    experiment: dict[str, Any], out: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 240.0
) -> subprocess.CompletedProcess:
    """``arena run`` on ``experiment`` written to ``out.parent / f"{out.name}-experiment.yaml"``
    (as :func:`arena.testing.run_tiny_experiment` names its input), with ``--output-dir out``
    and ``args`` (e.g. ``"--allow-import", "pkg.testing"``):
    :func:`arena.testing.experiments.run_in_child` (``env``, ``timeout``).

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    return run_in_child(experiment, out.parent / f"{out.name}-experiment.yaml", out, *args, env=env, timeout_s=timeout)


def experiment_against(policy: dict[str, Any], server: Any, requires: dict[str, str], **tiny: Any) -> dict[str, Any]:
    """:func:`arena.testing.tiny_experiment` (keywords ``tiny``) whose run's ``policy`` talks to
    the ``server`` the test started (``.host``, ``.port``; ``server: {external: true}``), with
    ``requires: requires`` (``{distribution: specifier}``)."""
    from arena.testing.experiments import tiny_experiment

    remote = {**policy, "remote_host": server.host, "remote_port": server.port}
    return {"requires": dict(requires), **tiny_experiment(remote, external_server=True, **tiny)}


def listed_plugin(name: str, *, timeout: float = 300.0) -> dict[str, Any]:
    """The entry of plugin ``name`` in ``arena plugins --json`` (:func:`run_arena`, so entry
    points load as a user's do): ``distribution``, ``version``, ``hooks``, ``registered``
    (``{kind: sorted names}``).

    Raises:
        AssertionError: the command fails, or lists no plugin ``name``.
    """
    result = run_arena("plugins", "--json", timeout=timeout)
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)["plugins"]}
    assert name in plugins, f"plugin '{name}' not listed (listed: {sorted(plugins)})"
    return plugins[name]


def refused_by_validate(tmp_path: Path, experiment: dict[str, Any]) -> str:
    """Write ``experiment`` to ``tmp_path / "exp.yaml"``, run ``arena validate`` on it and return
    its stderr with white space folded to single spaces (rich wraps long lines).

    Raises:
        AssertionError: validate did not exit with 2 (the experiment was not refused).
    """
    import yaml

    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    result = run_arena("validate", str(path))
    assert result.returncode == 2, result.stdout + result.stderr
    return " ".join(result.stderr.split())


def without_distribution(monkeypatch: pytest.MonkeyPatch, distribution: str) -> None:
    """Make :mod:`arena.config.requires` see ``distribution`` as not installed (every other
    distribution keeps its installed version) until ``monkeypatch`` undoes it."""
    import importlib.metadata

    from arena.config import requires as requires_module

    real_version = importlib.metadata.version

    def version(dist: str) -> str:
        if dist == distribution:
            raise importlib.metadata.PackageNotFoundError(dist)
        return real_version(dist)

    monkeypatch.setattr(requires_module, "version", version)
