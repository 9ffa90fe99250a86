"""The `matrix` section: runs expanded over values, stable names, one server per checkpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.config import load_experiment_dict
from arena.errors import ConfigError

MATRIX = {
    "axes": {
        "ckpt": {"key": "server.checkpoint", "values": {"s1000": "/ckpts/1000", "s2000": "/ckpts/2000"}},
        "task": {"key": "environment.task", "values": ["reach-v3", "push-v3"]},
    }
}
RUNS = {"eval": {"environment": {"type": "metaworld"}, "policy": {"type": "metaworld_expert_remote"}, "rollout_limit": {"num_episodes": 2}}}
NAMES = ["eval.s1000-reach-v3", "eval.s1000-push-v3", "eval.s2000-reach-v3", "eval.s2000-push-v3"]


def test_matrix_expands_in_place_with_stable_names() -> None:
    exp = load_experiment_dict({"matrix": {**MATRIX, "runs": ["eval"]}, "runs": {"first": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}}, **RUNS}}, source="m.yaml")
    assert list(exp.runs) == ["first", *NAMES]
    run = exp.runs["eval.s2000-push-v3"]
    assert run.environment.task == "push-v3" and run.server.checkpoint == "/ckpts/2000"
    again = load_experiment_dict(exp.snapshot(), source="experiment.yaml", trust_snapshot=True)
    assert list(again.runs) == list(exp.runs)  # the snapshot holds the expanded runs


def test_overrides_address_one_expanded_run_or_all() -> None:
    exp = load_experiment_dict({"matrix": MATRIX, "runs": RUNS},
                               ["runs.eval.rollout_limit.num_episodes=3", "runs.eval.s1000-push-v3.rollout_limit.num_episodes=5"], source="m.yaml")
    assert {n: r.rollout_limit.num_episodes for n, r in exp.runs.items()} == {**{n: 3 for n in NAMES}, "eval.s1000-push-v3": 5}


@pytest.mark.parametrize(
    ("matrix", "key"),
    [
        ({"axes": {}}, "matrix.axes"),
        ({"axes": {"a": {"key": "x", "values": []}}}, "matrix.axes.a.values"),
        ({"axes": {"a": {"key": "x", "values": ["a/b", "a_b"]}}}, "matrix.axes.a.values"),
        ({"axes": {"a": {"key": "x", "values": [1]}}, "runs": ["nope"]}, "matrix.runs"),
        ({"axis": {}}, "matrix"),
    ],
)
def test_malformed_matrix_names_the_key(matrix: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_experiment_dict({"matrix": matrix, "runs": RUNS}, source="m.yaml")
    assert f"key {key}" in str(info.value)


def _arena(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, cwd=tmp_path, timeout=120)


def test_list_runs_and_a_checkpoint_sweep_shares_a_server_per_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"matrix": MATRIX, "runs": RUNS}, sort_keys=False))
    listed = _arena(tmp_path, "validate", str(path), "--list-runs")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == NAMES
    dry = _arena(tmp_path, "run", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "sweep: 4 runs," in dry.stdout
    servers = [line for line in dry.stdout.splitlines() if line.startswith("  server ")]
    assert servers == [
        f"  server metaworld-expert for {NAMES[0]}, {NAMES[1]}: image (none), port 8000, readiness websocket, startup timeout 60 s, 1 CPU, 1 GiB",
        f"  server metaworld-expert for {NAMES[2]}, {NAMES[3]}: image (none), port 8000, readiness websocket, startup timeout 60 s, 1 CPU, 1 GiB",
    ]
