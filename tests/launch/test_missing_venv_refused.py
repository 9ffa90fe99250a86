"""A run whose benchmark venv does not exist, and whose simulator this interpreter lacks, is
refused before anything starts (exit 2, the setup command to run), by ``--dry-run`` too."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

CASES = [
    ({"type": "libero", "suite": "libero_spatial", "task": 0}, "libero", "libero"),
    ({"type": "aloha", "task": "transfer_cube"}, "aloha", "gym_aloha"),
]


@pytest.mark.parametrize(("environment", "venv", "module"), CASES, ids=[c[1] for c in CASES])
@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_run_needing_a_missing_venv_is_refused_with_the_setup_command(tmp_path, environment, venv, module, dry_run):
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed in this interpreter: the run would not need the venv")
    doc = {
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
        "runs": {"bench": {"environment": environment, "policy": {"type": "zero_action"}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    env = {**os.environ, "ARENA_VENVS": str(tmp_path / "no-venvs")}
    argv = [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)] + (["--dry-run"] if dry_run else [])
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    flat = " ".join(result.stderr.split())
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"`arena venv setup {venv}`" in flat and "run bench" in flat and str(path) in flat
    assert f"its own venv '{venv}', which does not exist ({tmp_path / 'no-venvs' / venv})" in flat
    assert module in flat
    assert not out.exists()  # nothing started, nothing written
