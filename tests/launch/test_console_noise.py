"""What `arena run` prints without a terminal (a log, CI, `| tee`): progress that ends on the
final count, and no third-party notices that do not concern the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("gymnasium_robotics")


@pytest.mark.slow
def test_a_franka_kitchen_run_in_two_workers_ends_on_its_final_count_without_adroit_notices(tmp_path: Path):
    doc = {
        "launch": {"backend": "local"},
        "runs": {"kitchen": {
            "environment": {"type": "franka_kitchen", "task": "microwave", "workers": 2},
            "policy": {"type": "zero_action"},
            "environment_builder": {"num_envs": 2, "seed": 0},
            "rollout_limit": {"num_episodes": 2, "max_episode_steps": 3},
        }},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    logs = done.stdout + done.stderr + "".join(p.read_text(errors="replace") for p in out.rglob("*.log"))
    assert "Adroit" not in logs  # gymnasium-robotics' notice, once per env worker before
    progress = [line for line in done.stdout.splitlines() if line.startswith("[arena] ")]
    assert progress and "runs 1/1 finished | episodes 2/2" in progress[-1], done.stdout

    # The notice is real: a bare import of this gymnasium-robotics prints it (1.2.1-1.4.2 do).
    bare = subprocess.run([sys.executable, "-c", "import gymnasium_robotics"], capture_output=True, text=True, timeout=120)
    version = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('gymnasium-robotics'))"],
                             capture_output=True, text=True).stdout.strip()
    if version in {"1.2.1", "1.2.2", "1.2.3", "1.2.4", "1.3.0", "1.3.1", "1.3.2", "1.4.0", "1.4.1", "1.4.2"}:
        assert "Adroit" in bare.stderr
