"""Environment workers through `arena run`: the same records for any `workers`, a crashed worker
costs one episode, SIGKILL of arena leaves no process behind, and a worker under another
interpreter (a Python 3.12 venv holding arena-core without the simulator extras)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers and the keeper are tested on Linux"),
]


def _arena(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _records(out: Path, run: str) -> dict[int, dict]:
    lines = (out / run / "episodes.jsonl").read_text().splitlines()
    return {r["episode_index"]: r for r in map(json.loads, lines)}


def _essence(record: dict) -> tuple:
    """What an episode's result is, whichever env or process ran it."""
    return (record["seed"], record["outcome"], record["steps"], record["return"], record.get("env_extras"))


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_records_are_the_same_with_and_without_workers(tmp_path):
    metaworld = {"type": "metaworld", "task": "push-v3", "cameras": True, "image_size": 24}
    kitchen = {"type": "franka_kitchen", "task": "microwave", "image_height": 18, "image_width": 32}
    data = {
        "launch": {"backend": "local", "local": {"jobs": 2}},
        "shared": {
            "environment_builder": {"num_envs": 3, "seed": 7},
            "rollout_limit": {"num_episodes": 5, "max_episode_steps": 6},
            "policy": {"type": "random_action"},
        },
        "runs": {
            "metaworld_0": {"environment": {**metaworld, "workers": 0}},
            "metaworld_2": {"environment": {**metaworld, "workers": 2}},
            "kitchen_0": {"environment": {**kitchen, "workers": 0}},
            "kitchen_3": {"environment": {**kitchen, "workers": 3}},
        },
    }
    out = tmp_path / "out"
    done = _arena("run", _write(tmp_path, data), "--output-dir", out, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for base, other in (("metaworld_0", "metaworld_2"), ("kitchen_0", "kitchen_3")):
        a, b = _records(out, base), _records(out, other)
        assert sorted(a) == sorted(b) == list(range(5))
        assert {i: _essence(r) for i, r in a.items()} == {i: _essence(r) for i, r in b.items()}, other
    log = (out / "kitchen_3" / "runner.log").read_text()
    assert "environment franka_kitchen: 3 workers (envs 0, 1, 2) under" in log


def _run_with_a_broken_worker(tmp_path, name: str, **worker_fields) -> dict[int, dict]:
    """Run 9 episodes over 3 env workers, one of which breaks (``worker_fields``) on seed 104,
    beside a baseline without workers; assert what a broken worker must leave (only its
    episode, index 4, ends ``error``; every other one as without it; the worker restarts);
    return the run's records by episode index."""
    toy = {"type": "arena.testing.envs:CrashingToyEnv", "image_size": 8, "crash_step": 3}
    data = {
        "shared": {
            "environment_builder": {"num_envs": 3, "seed": 100},
            "rollout_limit": {"num_episodes": 9, "max_episode_steps": 12},
            "policy": {"type": "random_action"},
        },
        "runs": {
            "baseline": {"environment": {**toy, "workers": 0}},
            name: {"environment": {**toy, "workers": 3, "crash_seeds": [104], **worker_fields}},
        },
    }
    out = tmp_path / "out"
    done = _arena("run", _write(tmp_path, data), "--output-dir", out, cwd=tmp_path, timeout=300)
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-3000:]  # 3: an error episode
    baseline, records = _records(out, "baseline"), _records(out, name)
    assert sorted(records) == list(range(9))
    assert records[4]["outcome"] == "error" and records[4]["steps"] == 2
    for i in set(records) - {4}:  # every other episode, on every env, as without the broken worker
        assert _essence(records[i]) == _essence(baseline[i]), i
    result = json.loads((out / name / "run_result.json").read_text())
    assert result["state"] == "completed" and result["counts"]["error"] == 1
    assert "restarting env worker" in (out / name / "runner.log").read_text()
    return records


def test_a_crashed_worker_ends_only_its_episode_and_the_run_goes_on(tmp_path):
    crashing = _run_with_a_broken_worker(tmp_path, "crashing", crash_mode="segfault")
    broken = crashing[4]
    assert broken["error"].startswith(f"env worker {broken['env_id']} (envs {broken['env_id']}, pid ")
    assert "killed by SIGSEGV" in broken["error"] and "episode seed 104 crashes" in broken["error"]
    assert any(r["env_id"] == broken["env_id"] and i > 4 for i, r in crashing.items())  # its env went on


def test_a_hung_worker_is_killed_after_worker_timeout_s_and_the_run_goes_on(tmp_path):
    """A simulator stuck in native code used to hang the run forever; now its worker is killed
    after ``worker_timeout_s``, its episode ends ``error`` naming the timeout, it restarts."""
    started = time.monotonic()
    stuck = _run_with_a_broken_worker(tmp_path, "hanging", crash_mode="hang", worker_timeout_s=3)[4]
    assert time.monotonic() - started < 240
    assert "did not answer its step within worker_timeout_s=3 s" in stuck["error"] and "was killed" in stuck["error"]


# -- no orphans ------------------------------------------------------------------------------

_FORKING_SERVER = """
import os, subprocess, sys
pid_file, host, port = sys.argv[1:4]
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
pids = [os.getpid(), subprocess.Popen(sleep).pid, subprocess.Popen(sleep, start_new_session=True).pid]
with open(pid_file + ".tmp", "w") as f:
    f.write(" ".join(map(str, pids)))
os.rename(pid_file + ".tmp", pid_file)
os.execv(sys.executable, [sys.executable, "-m", "arena", "serve", "metaworld-expert", "--host", host, "--port", port])
"""


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(name))
    return tree


def _descendants(root: int) -> dict[int, str]:
    tree, found, todo = _children(), {}, [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigkill_of_arena_leaves_no_server_grandchild_runner_or_env_worker(tmp_path):
    forker = tmp_path / "forking_server.py"
    forker.write_text(_FORKING_SERVER)
    pid_file = tmp_path / "server.pids"
    data = {
        "launch": {"backend": "local", "local": {"jobs": 2},
                   "watchdog": {"stall_s": 600, "first_episode_grace_s": 600, "max_restarts": 0}},
        "runs": {
            "served": {
                "environment": {"type": "metaworld", "task": "reach-v3"},
                "policy": {"type": "metaworld_expert_remote"},
                "server": {"local_command": ["{python}", str(forker), str(pid_file), "{host}", "{port}"]},
                "rollout_limit": {"num_episodes": 200, "max_episode_steps": 500},
            },
            "workers": {
                "environment": {"type": "arena.testing.envs:ToyReachEnv", "workers": 2, "step_delay_s": 0.05,
                                "max_steps": 10_000},
                "policy": {"type": "zero_action"},
                "environment_builder": {"num_envs": 2},
                "rollout_limit": {"num_episodes": 100},
            },
        },
    }
    arena = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(_write(tmp_path, data)), "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 240
        while True:
            assert arena.poll() is None, "arena ended before it could be killed"
            assert time.monotonic() < deadline, f"not everything started: {sorted(started.values())}"
            started = _descendants(arena.pid)
            workers = [c for c in started.values() if "arena.envs.workers" in c and "keeper" not in c]
            if pid_file.exists() and len(workers) == 2 and any("arena serve" in c or "serve metaworld" in c for c in started.values()):
                break
            time.sleep(0.2)
        server_pids = [int(p) for p in pid_file.read_text().split()]
        started.update({pid: "from the server's pid file" for pid in server_pids})
        assert all(_alive(p) for p in server_pids)
        arena.kill()  # SIGKILL: arena gets no chance to stop anything itself
        arena.wait(timeout=30)
        deadline = time.monotonic() + 60
        while any(_alive(p) for p in started) and time.monotonic() < deadline:
            time.sleep(0.2)
        survivors = {p: c for p, c in started.items() if _alive(p)}
        assert survivors == {}
    finally:
        arena.kill()
        for pid in started:
            if _alive(pid):
                os.kill(pid, 9)


def test_cancelling_a_run_stops_its_workers_and_records_cancelled(tmp_path):
    data = {
        "runs": {
            "workers": {
                "environment": {"type": "arena.testing.envs:ToyReachEnv", "workers": 2, "step_delay_s": 0.05,
                                "max_steps": 10_000},
                "policy": {"type": "zero_action"},
                "environment_builder": {"num_envs": 2},
                "rollout_limit": {"num_episodes": 10},
            },
        },
    }
    out = tmp_path / "out"
    arena = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(_write(tmp_path, data)), "--output-dir", str(out)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 180
        while len([c for c in started.values() if "arena.envs.workers" in c and "keeper" not in c]) < 2:
            assert arena.poll() is None and time.monotonic() < deadline, "the workers never started"
            time.sleep(0.2)
            started = _descendants(arena.pid)
        time.sleep(1.0)  # mid-step, most likely
        arena.terminate()  # what `arena cancel` does
        assert arena.wait(timeout=120) != 0
        assert [p for p in started if _alive(p)] == []
        status = json.loads((out / "workers" / "status.json").read_text())
        assert status["state"] == "cancelled"
    finally:
        arena.kill()
        for pid in started:
            if _alive(pid):
                os.kill(pid, 9)


# -- another interpreter ---------------------------------------------------------------------


def _python_312() -> str | None:
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")  # the suite's HOME is a fresh folder
    candidates = [shutil.which("python3.12"), *sorted(glob.glob(os.path.join(pyenv, "versions", "3.12*", "bin", "python3.12")))]
    for candidate in candidates:
        if candidate and subprocess.run(
            [candidate, "-c", "import sys, venv; assert sys.version_info[:2] == (3, 12)"], capture_output=True
        ).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def python_312_venv(tmp_path_factory) -> Path:
    """A Python 3.12 venv made by arena.venvs.ensure_venv: arena-core without extras, nothing else."""
    base = _python_312()
    if base is None:
        pytest.skip("no Python 3.12 interpreter (python3.12 on PATH or $PYENV_ROOT/versions/3.12*) to make the venv with")
    from arena.venvs import ensure_venv

    root = tmp_path_factory.mktemp("venvs")
    previous = {k: os.environ.get(k) for k in ("ARENA_VENVS", "PIP_CACHE_DIR")}
    os.environ["ARENA_VENVS"] = str(root)
    os.environ["PIP_CACHE_DIR"] = str(root / "pip-cache")
    try:
        return ensure_venv("py312", python=base, quiet=True)
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.mark.timeout(900)  # the venv's pip install comes first
def test_a_worker_under_python_3_12_without_simulator_extras_runs_the_episodes(tmp_path, python_312_venv):
    python = str(python_312_venv)
    for module in ("mujoco", "metaworld", "av"):  # arena-core alone: no simulator extras
        assert subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode != 0, module
    toy = {"type": "arena.testing.envs:ToyReachEnv", "image_size": 8}
    data = {
        "shared": {
            "environment_builder": {"num_envs": 2, "seed": 3},
            "rollout_limit": {"num_episodes": 4, "max_episode_steps": 10},
            "policy": {"type": "random_action"},
        },
        "runs": {
            "here": {"environment": {**toy}},
            "py312": {"environment": {**toy, "python": python}},
        },
    }
    path = _write(tmp_path, data)
    # Without the extras, arena itself and `arena validate` work in that venv too.
    validated = subprocess.run([python, "-m", "arena", "validate", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    out = tmp_path / "out"
    done = _arena("run", path, "--output-dir", out, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    here, there = _records(out, "here"), _records(out, "py312")
    assert {i: _essence(r) for i, r in here.items()} == {i: _essence(r) for i, r in there.items()}
    assert "1 worker (envs 0-1) under " + python + " (Python 3.12" in (out / "py312" / "runner.log").read_text()
