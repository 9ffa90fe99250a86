"""Text arena quotes from elsewhere (a server's last log line, a path) reaches the console as
written: ``[/x]`` used to raise rich's ``MarkupError`` mid-run, ``[kitchen]`` used to vanish."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from arena.testing.experiments import run_in_child

pytestmark = pytest.mark.slow

REACH = {"type": "metaworld", "task": "reach-v3"}
#: What the failing server prints last: a closing tag rich cannot match, and an extra rich would eat.
LAST_WORDS = "missing simulator: pip install 'arena-core[kitchen]' (checkpoint [/ckpt/a])"


def test_a_reason_with_brackets_is_printed_literally_and_the_run_ends_normally(tmp_path):
    broken = {
        "local_command": ["{python}", "-c", f"import sys; print({LAST_WORDS!r}, flush=True); sys.exit(1)"],
        "readiness": "tcp",
        "startup_timeout_s": 60,
    }
    doc = {
        "launch": {"backend": "local", "local": {"jobs": 2}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
        "runs": {
            "broken": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": broken},
            "fine": {"environment": REACH, "policy": {"type": "zero_action"}},
        },
    }
    out = tmp_path / "out[/x]"
    run = run_in_child(doc, tmp_path / "exp.yaml", out, timeout_s=300)
    console = run.stdout + run.stderr
    assert run.returncode == 3, console  # a failed run, not arena crashing (exit 1)
    assert "MarkupError" not in console
    assert LAST_WORDS in console  # the runner's line and the summary's both quote it whole
    assert str(out) in run.stdout
    assert (out / "index.html").exists() and (out / "experiment_result.json").exists()
    result = json.loads((out / "experiment_result.json").read_text())
    assert result["runs"]["fine"]["state"] == "completed"
    assert result["runs"]["broken"]["state"] == "failed"
    assert LAST_WORDS in result["runs"]["broken"]["error"]

    status = subprocess.run([sys.executable, "-m", "arena", "status", str(out)], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    assert LAST_WORDS in status.stdout.replace("\n", "")


def test_validate_quotes_paths_and_warnings_literally(tmp_path):
    exp_dir = tmp_path / "[/x] exps"
    exp_dir.mkdir(parents=True)
    path = exp_dir / "exp.yaml"
    path.write_text(yaml.safe_dump({"runs": {"a": {"environment": REACH, "policy": {"type": "zero_action"}}}}))
    result = subprocess.run([sys.executable, "-m", "arena", "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ok: {path}" in result.stdout
