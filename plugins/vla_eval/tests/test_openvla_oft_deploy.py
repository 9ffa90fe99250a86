"""arena's managed OpenVLA-OFT server command (``examples/libero_openvla_oft.yaml``; ALOHA)
against OFT's own ``vla-scripts/deploy.py`` (moojink/openvla-oft @ 213c5ff, unchanged, in
``reference/openvla-oft``; its model stubbed as that folder's README says): the server arena
starts takes the requests arena sends."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from arena.config import load_experiment
from arena.errors import PolicyError

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("json_numpy")

from arena_vla_eval.openvla.policy import OpenVLARemoteConfig, OpenVLARemotePolicy  # noqa: E402
from arena_vla_eval.openvla.servertask import openvla_server_task  # noqa: E402
from openvla_deploy_harness import OFT, free_port, start, stop, wait_ready  # noqa: E402

pytestmark = pytest.mark.timeout(120)
EXAMPLE = Path(__file__).parents[1] / "examples" / "libero_openvla_oft.yaml"


class _Env:
    num_envs = 1


def _libero_obs() -> dict:
    rng = np.random.default_rng(0)
    return {
        "camera_obs": {
            "agentview_rgb": rng.integers(0, 256, (1, 64, 64, 3), dtype=np.uint8),
            "eye_in_hand_rgb": rng.integers(0, 256, (1, 64, 64, 3), dtype=np.uint8),
        },
        "policy": {"eef_pos": np.ones((1, 3)), "eef_quat": np.array([[0.0, 0.6, 0.0, 0.8]]), "gripper_qpos": np.full((1, 2), 0.02)},
    }


def _aloha_obs() -> dict:
    rng = np.random.default_rng(1)
    cams = {f"{c}_rgb": rng.integers(0, 256, (1, 48, 64, 3), dtype=np.uint8) for c in ("cam_high", "cam_left_wrist", "cam_right_wrist")}
    return {"camera_obs": cams, "policy": {"joint_pos": np.linspace(0, 1, 14)[None]}}


def _run_against(command: list[str], port: int, steps: int, embodiment: str = "oft_libero") -> list[np.ndarray]:
    proc = start(command, OFT)
    try:
        wait_ready(proc, port)
        config = OpenVLARemoteConfig(embodiment=embodiment, remote_host="127.0.0.1", remote_port=port, max_reconnect_attempts=0)
        policy = OpenVLARemotePolicy(config)
        policy.start(_Env())
        policy.set_task_description("pick up the black bowl")
        policy.reset([0])
        observe = _libero_obs if embodiment == "oft_libero" else _aloha_obs
        try:
            return [policy.get_action(None, observe())[0] for _ in range(steps)]
        finally:
            policy.close()
    finally:
        log = stop(proc)
        print(log)  # shown by pytest when the test fails


def _managed_command(port: int) -> list[str]:
    """The deploy command of the example's ``spatial.0`` run, with this folder as the checkout."""
    config = load_experiment(EXAMPLE).runs["spatial.0"].policy
    assert isinstance(config, OpenVLARemoteConfig)
    config = config.model_copy(update={"server_repo_dir": str(OFT), "server_python": sys.executable})
    task = openvla_server_task(config)
    return task.render(task.local_command, host="127.0.0.1", port=port)


def test_the_oft_libero_examples_server_answers_arenas_requests_with_8_action_chunks():
    port = free_port()
    command = _managed_command(port)
    assert "--num_images_in_input 2 --use_proprio True" in command[-1]
    assert "--unnorm_key libero_spatial_no_noops" in command[-1]
    actions = _run_against(command, port, steps=9)
    # two requests (steps 0 and 8); deploy.py's chunk of 8, replayed open loop
    assert [round(a[0], 2) for a in actions] == [0.01] * 8 + [0.02]
    assert [round(a[1], 2) for a in actions] == [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.0]
    assert all(a[-1] == -1.0 for a in actions)  # the model's gripper 1.0 reaches LIBERO as -1


def test_deploy_py_started_without_the_image_count_answers_error():
    # what arena's command was before: deploy.py's default of 3 images while LIBERO sends 2
    port = free_port()
    command = _managed_command(port)
    command[-1] = command[-1].replace(" --num_images_in_input 2", "")
    with pytest.raises(PolicyError, match='answered "error"'):
        _run_against(command, port, steps=1)


def test_a_managed_oft_aloha_server_takes_three_images_and_answers_25_by_14_chunks():
    port = free_port()
    config = OpenVLARemoteConfig(embodiment="oft_aloha", checkpoint="/ckpts/openvla-7b-oft-aloha-put-x-into-pot",
                                 unnorm_key="aloha1_put_X_into_pot_300_demos", server_repo_dir=str(OFT),
                                 server_python=sys.executable, server_args=["--use_film", "True"])
    task = openvla_server_task(config)
    command = task.render(task.local_command, host="127.0.0.1", port=port)
    assert command[-1].endswith("--num_images_in_input 3 --use_proprio True --use_film True")
    actions = _run_against(command, port, steps=26, embodiment="oft_aloha")
    assert actions[0].shape == (14,)  # OFT's constants chose ALOHA's from the command line ("aloha")
    assert [round(a[1], 2) for a in actions[23:26]] == [0.23, 0.24, 0.0]  # 25-row chunks, replayed open loop
