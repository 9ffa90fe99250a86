"""``arena run`` of the ALOHA examples: envs in workers under the ALOHA venv, arena's own
interpreter running the rollout and the policies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.testing.venvs import benchmark_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.slow
def test_quick_example_expert_transfers_the_cube_and_zero_actions_never_do(tmp_path):
    """Seeds 0-9, deterministic: the scripted expert succeeds on all ten; zero actions on none
    (three of them here: each is a full 300-step timeout)."""
    from arena.results.run_summary import collect_run_records

    benchmark_python("aloha", "arena aloha setup")
    env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(EXAMPLES / "aloha_quick.yaml"), "--output-dir", str(out),
         "runs.transfer_cube_zero.rollout_limit.num_episodes=3"],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    expert = sorted(collect_run_records(out / "transfer_cube_expert"), key=lambda r: r.episode_index)
    zero = sorted(collect_run_records(out / "transfer_cube_zero"), key=lambda r: r.episode_index)
    assert [r.seed for r in expert] == list(range(10)) and [r.seed for r in zero] == [0, 1, 2]
    assert [r.outcome for r in expert] == ["success"] * 10
    assert all(r.steps < 300 and r.env_extras["max_reward"] == 4.0 for r in expert)
    assert [r.outcome for r in zero] == ["timeout"] * 3
    assert all(r.steps == 300 and r.env_extras["max_reward"] == 0.0 for r in zero)
    # The same seed is the same cube in both runs.
    assert [r.env_extras["initial_object_pose"] for r in expert[:3]] == [r.env_extras["initial_object_pose"] for r in zero]
