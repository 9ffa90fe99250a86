"""``arena run`` on LIBERO (arena's ``libero`` environment, workers in the LIBERO venv) with
``vla_eval_remote`` against vla-eval's real server: the ``libero`` adapter meets the real
environment's layout, and the dummy model, strict here (it takes exactly ``agentview`` and
``wrist`` images and an 8-dim state, as the server's observation params asked), accepts every
observation, so each episode ends by the step limit, never by an ERROR reply."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("vla_eval")
pytest.importorskip("arena_libero", reason="the LIBERO environment is another distribution (arena-plugin-libero)")

STEPS = 6


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_vla_eval_libero_adapter_on_arenas_libero_environment(tmp_path):
    from arena.results.aggregate import collect_run_records
    from arena.testing.venvs import benchmark_python

    benchmark_python("libero")
    experiment = {
        "requires": {"arena-plugin-vla-eval": ">=0.1", "arena-plugin-libero": ">=0.1"},
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0},
                   "rollout_limit": {"num_episodes": 1, "max_episode_steps": STEPS}},
        "runs": {
            "bowl_vla_eval": {
                "environment": {"type": "libero", "suite": "libero_spatial", "task": 0, "cameras": True, "image_size": 64},
                "policy": {
                    "type": "vla_eval_remote", "embodiment": "libero", "server_module": "arena_vla_eval.dummy",
                    "server_launcher": "python", "server_gpus": 0, "server_startup_timeout_s": 120,
                    "observation_params": {"send_wrist_image": True},  # with the server's send_state: both
                    "server_args": {"action_dim": 7, "chunk_size": 4, "require_images": ["agentview", "wrist"], "state_dim": 8},
                },
            }
        },
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
    result = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(tmp_path / "out")],
                            capture_output=True, text=True, env=env, timeout=850)
    records = collect_run_records(tmp_path / "out" / "bowl_vla_eval")
    assert [(r.outcome, r.steps, r.error) for r in records] == [("timeout", STEPS, None)], result.stdout + result.stderr
    assert records[0].latency["requests"] == STEPS
    assert result.returncode == 0, result.stdout + result.stderr
