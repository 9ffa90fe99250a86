"""Helpers of the tests on the real one-node Slurm cluster (the cluster itself: conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REACH = {"type": "metaworld", "task": "reach-v3"}
ROOT = Path(__file__).resolve().parents[3]
#: The two experts share one policy server task: one Slurm job, one server (reach_expert's job).
QUICKSTART_RUNS = ("reach_expert", "reach_zero", "pick_place_random", "pick_place_expert")


def slurm_options(**extra) -> dict:
    """Jobs run this interpreter's arena: the setup line is what a user's venv activation does.
    The runner asks for 0.5 GiB: beside a server that declares its memory, an unset
    launch.slurm.memory would add 16 GiB, more than the test node's 8000 MB."""
    bin_dir = Path(sys.executable).parent
    return {
        "setup": [f"export PATH={bin_dir}:$PATH", "export MUJOCO_GL=osmesa"],
        "arena": f"{sys.executable} -m arena",
        "python": sys.executable,
        "cpus": 1,
        "memory": 0.5,
        "poll_interval_s": 0.5,
        **extra,
    }


def quickstart(tmp_path: Path, name: str, runs: tuple[str, ...] = QUICKSTART_RUNS, **slurm) -> Path:
    """examples/quickstart.yaml cut to a few runs with short episodes."""
    doc = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    doc["runs"] = {run: doc["runs"][run] for run in runs}
    doc["shared"]["rollout_limit"] = {"num_episodes": 3, "max_episode_steps": 150}
    doc["launch"]["slurm"] = slurm_options(**slurm)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_experiment(tmp_path: Path, name: str, runs: dict, **slurm) -> Path:
    doc = {
        "launch": {"backend": "slurm", "slurm": slurm_options(**slurm)},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 2, "max_episode_steps": 40}},
        "runs": runs,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def arena(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, timeout=timeout)


def outcomes(out: Path, run: str) -> list[tuple]:
    from arena.results.run_summary import collect_run_records

    return [
        (r.episode_index, r.seed, r.outcome, r.steps, round(r.return_, 6))
        for r in collect_run_records(out / run)
    ]


def results(out: Path) -> dict:
    return json.loads((out / "experiment_result.json").read_text())["runs"]


def wait_for(check, timeout_s: float, what: str, cluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout_s:g} s\n{cluster.logs()}")


def state_of(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
