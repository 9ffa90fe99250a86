"""``arena run`` on LIBERO (arena's ``libero`` environment, workers in the LIBERO venv):

* ``vla_eval_remote`` against vla-eval's real server: the ``libero`` adapter meets the real
  environment's layout, and the dummy model, strict here (it takes exactly ``agentview`` and
  ``wrist`` images and an 8-dim state, as the server's observation params asked), accepts every
  observation, so the episode ends by the step limit, never by an ERROR reply;
* ``openvla_remote`` (``oft_libero``) against the OFT deploy double, which checks every key,
  dtype and shape OFT's server reads: 8-action chunks replayed open loop, the gripper as OFT's
  client processes it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("vla_eval")
pytest.importorskip("arena_libero", reason="the LIBERO environment is another distribution (arena-plugin-libero)")
pytest.importorskip("fastapi")

STEPS = 6
OFT_STEPS = 10


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_vla_eval_and_oft_libero_adapters_on_arenas_libero_environment(tmp_path):
    from arena.results.run_summary import collect_run_records
    from arena.testing.venvs import benchmark_python

    from arena_vla_eval.openvla.testing import DeployDouble

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
    experiment["launch"]["local"]["jobs"] = 2
    path = tmp_path / "exp.yaml"
    env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
    with DeployDouble("oft", platform="libero") as double:
        experiment["runs"]["bowl_oft"] = {
            "environment": experiment["runs"]["bowl_vla_eval"]["environment"],
            "rollout_limit": {"num_episodes": 1, "max_episode_steps": OFT_STEPS},
            "policy": {"type": "openvla_remote", "embodiment": "oft_libero", "remote_host": double.host,
                       "remote_port": double.port},
            "server": {"external": True},
        }
        path.write_text(yaml.safe_dump(experiment))
        result = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(tmp_path / "out")],
                                capture_output=True, text=True, env=env, timeout=850)
        requests = list(double.requests)
    records = collect_run_records(tmp_path / "out" / "bowl_vla_eval")
    assert [(r.outcome, r.steps, r.error) for r in records] == [("timeout", STEPS, None)], result.stdout + result.stderr
    assert records[0].latency["requests"] == STEPS
    oft = collect_run_records(tmp_path / "out" / "bowl_oft")
    assert [(r.outcome, r.steps, r.error) for r in oft] == [("timeout", OFT_STEPS, None)], result.stdout + result.stderr
    assert oft[0].latency["requests"] == 2 and len(requests) == 2  # steps 0 and 8 of 10
    assert requests[0]["instruction"] == "pick up the black bowl between the plate and the ramekin and place it on the plate"
    assert result.returncode == 0, result.stdout + result.stderr
