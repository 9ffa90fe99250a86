"""``arena run`` on ALOHA (arena's ``aloha`` environment, gym-aloha in its venv, three cameras):
``vla_eval_remote`` with its ``aloha`` adapter against vla-eval's real server (a strict dummy:
exactly ``cam_high``, ``cam_left_wrist``, ``cam_right_wrist`` and the 14 joint positions), and
``openvla_remote`` (``oft_aloha``) against the OFT double (25 x 14 chunks: two requests in 26
steps). Both reach the step limit, never an error."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

pytest.importorskip("vla_eval")
pytest.importorskip("fastapi")
pytest.importorskip("arena_aloha", reason="the ALOHA environment is another distribution (arena-plugin-aloha)")

CAMERAS = ["cam_high", "cam_left_wrist", "cam_right_wrist"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_vla_eval_and_oft_aloha_adapters_on_arenas_aloha_environment(tmp_path):
    from arena.results.run_summary import collect_run_records
    from arena.testing.venvs import benchmark_python

    from arena_vla_eval.openvla.testing import DeployDouble

    benchmark_python("aloha")
    environment = {"type": "aloha", "task": "transfer_cube", "cameras": CAMERAS, "image_height": 48, "image_width": 64}
    experiment = {
        "launch": {"backend": "local", "local": {"jobs": 2}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}},
        "runs": {
            "cube_vla_eval": {
                "environment": environment,
                "rollout_limit": {"num_episodes": 1, "max_episode_steps": 6},
                "policy": {
                    "type": "vla_eval_remote", "embodiment": "aloha", "server_module": "arena_vla_eval.dummy",
                    "server_launcher": "python", "server_gpus": 0, "server_startup_timeout_s": 120,
                    "server_args": {"action_dim": 14, "chunk_size": 4, "require_images": CAMERAS, "state_dim": 14},
                },
            }
        },
    }
    path = tmp_path / "exp.yaml"
    env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
    with DeployDouble("oft", platform="aloha") as double:
        experiment["runs"]["cube_oft"] = {
            "environment": environment,
            "rollout_limit": {"num_episodes": 1, "max_episode_steps": 26},
            "policy": {"type": "openvla_remote", "embodiment": "oft_aloha", "remote_host": double.host, "remote_port": double.port},
            "server": {"external": True},
        }
        path.write_text(yaml.safe_dump(experiment))
        result = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(tmp_path / "out")],
                                capture_output=True, text=True, env=env, timeout=550)
        requests = list(double.requests)
    for run, steps, served in (("cube_vla_eval", 6, 6), ("cube_oft", 26, 2)):
        records = collect_run_records(tmp_path / "out" / run)
        assert [(r.outcome, r.steps, r.error) for r in records] == [("timeout", steps, None)], result.stdout + result.stderr
        assert records[0].latency["requests"] == served
    assert len(requests) == 2 and requests[0]["state"].shape == (14,)
    assert result.returncode == 0, result.stdout + result.stderr
