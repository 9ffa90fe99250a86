"""The openpi ``aloha`` adapter sends what openpi's ALOHA sim client sends, for the same frame.

openpi's client (``examples/aloha_sim/env.py`` of Physical-Intelligence/openpi) turns each
gym-aloha observation into ``{"state": agent_pos, "images": {"cam_high": top}}`` where ``top``
is the ``top`` camera resized with padding to 224 x 224 (``openpi_client.image_tools``),
converted to uint8 and transposed to CHW; it sends no prompt, so the ``pi0_aloha_sim`` server
inserts its config's default, "Transfer cube". Reimplemented below from that source with the
real ``openpi_client``, and compared with the adapter's request for the ``aloha`` environment's
observation of the same seed (gym-aloha renders in the ALOHA sim venv).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from openpi_client import image_tools

from arena.testing.venvs import benchmark_python
from arena_openpi.adapters import OpenPIAlohaAdapter
from arena_openpi.testing import openpi_server_double

SIM_CHECKS = Path(__file__).resolve().parents[1] / "plugins" / "aloha" / "tests" / "sim_checks.py"
SEEDS = ("0", "1")


def openpi_aloha_sim_request(top: np.ndarray, agent_pos: np.ndarray) -> dict:
    """What openpi's ALOHA sim client sends for one gym-aloha observation (see the module docstring)."""
    image = image_tools.convert_to_uint8(image_tools.resize_with_pad(top, 224, 224))
    return {"state": agent_pos, "images": {"cam_high": np.transpose(image, (2, 0, 1))}}


@pytest.fixture(scope="module")
def reset_frames(tmp_path_factory) -> dict:
    """gym-aloha's and the ``aloha`` env's reset observations of ``SEEDS`` (rendered in the venv)."""
    python = benchmark_python("aloha", "arena aloha setup")
    path = tmp_path_factory.mktemp("aloha") / "frames.npz"
    env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
    done = subprocess.run([str(python), str(SIM_CHECKS), "frames", str(path), *SEEDS], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["saved"]
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


@pytest.mark.slow
def test_aloha_adapter_request_equals_openpi_aloha_sim_client_for_the_same_frame(reset_frames):
    adapter = OpenPIAlohaAdapter()
    for seed in SEEDS:
        observation = {
            "camera_obs": {"cam_high_rgb": reset_frames[f"cam_high_rgb_{seed}"][None]},
            "policy": {"joint_pos": reset_frames[f"joint_pos_{seed}"][None]},
        }
        ours = adapter.pack_request(adapter.extract(observation, 0), "Transfer cube")
        theirs = openpi_aloha_sim_request(reset_frames[f"gym_top_{seed}"], reset_frames[f"gym_agent_pos_{seed}"])
        assert sorted(ours) == ["images", "prompt", "state"] and sorted(ours["images"]) == ["cam_high"]
        image, expected = ours["images"]["cam_high"], theirs["images"]["cam_high"]
        assert image.dtype == np.uint8 and image.shape == (3, 224, 224)
        assert np.array_equal(image, expected), f"seed {seed}: {np.mean(image != expected):.4%} of pixels differ"
        assert ours["state"].dtype == np.float64 and np.array_equal(ours["state"], theirs["state"])
        assert ours["prompt"] == "Transfer cube"  # pi0_aloha_sim's default prompt, sent explicitly
    # The frames themselves: the aloha env's reset equals gym-aloha's for the seed, pixel for pixel.
    for seed in SEEDS:
        assert np.array_equal(reset_frames[f"cam_high_rgb_{seed}"], reset_frames[f"gym_top_{seed}"])


@pytest.mark.slow
def test_pi0_remote_on_aloha_against_the_openpi_double_sends_openpi_requests(reset_frames, tmp_path):
    """``arena run``: the env in a worker under the ALOHA venv, pi0_remote with the aloha adapter.

    Episode ``i`` (seed ``i``) starts with a request for gym-aloha's reset frame of that seed,
    which must be exactly what openpi's client would send for it.
    """
    from arena.results.aggregate import collect_run_records

    benchmark_python("aloha", "arena aloha setup")
    with openpi_server_double("aloha", "pi0") as server:
        experiment = {
            "requires": {"arena-plugin-aloha": ">=0.1", "arena-plugin-openpi": ">=0.1"},
            "shared": {
                "environment_builder": {"num_envs": 1, "seed": 0},
                "rollout_limit": {"num_episodes": len(SEEDS), "max_episode_steps": 3},
            },
            "runs": {
                "cube_pi0": {
                    "environment": {"type": "aloha", "task": "transfer_cube"},
                    "policy": {
                        "type": "pi0_remote",
                        "policy_variant": "pi0",
                        "openpi_embodiment_adapter": "aloha",
                        "remote_host": server.host,
                        "remote_port": server.port,
                    },
                    "server": {"external": True},
                }
            },
        }
        path = tmp_path / "exp.yaml"
        path.write_text(yaml.safe_dump(experiment))
        env = {**os.environ, "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}
        result = subprocess.run(
            [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(tmp_path / "out")],
            capture_output=True, text=True, env=env, timeout=600,
        )
        requests = list(server.model.requests)
    assert result.returncode == 0, result.stdout + result.stderr
    records = sorted(collect_run_records(tmp_path / "out" / "cube_pi0"), key=lambda r: r.episode_index)
    assert [(r.seed, r.outcome, r.steps) for r in records] == [(0, "timeout", 3), (1, "timeout", 3)]
    assert len(requests) == len(SEEDS)  # pi0 replays 10 rows: one request per 3-step episode
    for seed, request in zip(SEEDS, requests):
        expected = openpi_aloha_sim_request(reset_frames[f"gym_top_{seed}"], reset_frames[f"gym_agent_pos_{seed}"])
        assert np.array_equal(request["images"]["cam_high"], expected["images"]["cam_high"]), f"seed {seed}"
        assert np.array_equal(request["state"], expected["state"]) and request["prompt"] == "Transfer cube"
