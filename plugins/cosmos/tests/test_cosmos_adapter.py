"""Cosmos DROID adapter, config, server task and double."""

from __future__ import annotations

import numpy as np
import pytest

from arena_cosmos.adapters import CosmosDroidAdapter
from arena.images import half_size, resize_with_pad
from arena_cosmos.policy import CosmosRemoteConfig, CosmosRemotePolicy
from arena_cosmos.server import cosmos_server_task
from arena_cosmos.testing import RequestRejected, cosmos_reply, validate_cosmos_droid_request

RNG = np.random.default_rng(0)


def droid_obs(n: int = 2, h: int = 180, w: int = 320) -> dict:
    """The franka_kitchen (DROID) layout."""
    cams = ("external_camera_rgb", "external_camera_2_rgb", "wrist_camera_rgb")
    return {
        "camera_obs": {c: RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8) for c in cams},
        "policy": {
            "joint_pos": RNG.normal(size=(n, 7)).astype(np.float32),
            "gripper_pos": RNG.uniform(size=(n, 1)).astype(np.float32),
        },
    }


def request_of(obs, env_id=1, prompt="open the microwave door"):
    adapter = CosmosDroidAdapter()
    return adapter.pack_request(adapter.extract(obs, env_id), prompt)


def test_request_has_the_composed_view_joints_gripper_and_prompt():
    obs = droid_obs()
    req = request_of(obs)
    assert sorted(req) == [
        "observation/gripper_position",
        "observation/image",
        "observation/joint_position",
        "prompt",
    ]
    image = req["observation/image"]
    assert image.dtype == np.uint8 and image.shape == (540, 640, 3)
    assert req["observation/joint_position"].dtype == np.float32 and req["observation/joint_position"].shape == (7,)
    assert req["observation/gripper_position"].dtype == np.float32 and req["observation/gripper_position"].shape == (1,)
    np.testing.assert_array_equal(req["observation/joint_position"], obs["policy"]["joint_pos"][1])
    assert req["prompt"] == "open the microwave door"
    validate_cosmos_droid_request(req)


@pytest.mark.parametrize("h, w", [(180, 320), (48, 64), (720, 1280)])
def test_wrist_view_on_top_and_halved_exterior_views_below(h, w):
    obs = droid_obs(h=h, w=w)
    image = request_of(obs, env_id=0)["observation/image"]
    cams = obs["camera_obs"]
    wrist = resize_with_pad(cams["wrist_camera_rgb"][0], 360, 640)
    left = half_size(resize_with_pad(cams["external_camera_rgb"][0], 360, 640))
    right = half_size(resize_with_pad(cams["external_camera_2_rgb"][0], 360, 640))
    assert np.array_equal(image[:360], wrist)
    assert np.array_equal(image[360:, :320], left)
    assert np.array_equal(image[360:, 320:], right)


def test_resize_with_pad_matches_openpi_client():
    image_tools = pytest.importorskip("openpi_client.image_tools")
    image = RNG.integers(0, 256, (180, 320, 3), dtype=np.uint8)
    assert np.array_equal(resize_with_pad(image, 360, 640), image_tools.resize_with_pad(image, 360, 640))
    square = RNG.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    assert np.array_equal(resize_with_pad(square, 360, 640), image_tools.resize_with_pad(square, 360, 640))


def test_half_size_is_the_rounded_mean_of_each_2x2_block():
    image = np.array([[[0], [1], [10], [10]], [[2], [2], [20], [21]]], np.uint8).repeat(3, axis=2)
    out = half_size(image)
    assert out.shape == (1, 2, 3) and out.dtype == np.uint8
    assert out[0, :, 0].tolist() == [1, 15]  # (0+1+2+2)/4 = 1.25 -> 1; (10+10+20+21)/4 = 15.25 -> 15
    with pytest.raises(ValueError, match="even"):
        half_size(np.zeros((3, 4, 3), np.uint8))


def test_half_size_matches_torch_bilinear_when_available():
    torch = pytest.importorskip("torch")
    image = RNG.integers(0, 256, (360, 640, 3), dtype=np.uint8)
    t = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    ref = torch.nn.functional.interpolate(t, scale_factor=0.5, mode="bilinear", align_corners=False)
    ref = ref[0].permute(1, 2, 0).round().to(torch.uint8).numpy()
    assert np.array_equal(half_size(image), ref)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.pop("observation/image"), "no 'observation/image'"),
        (lambda r: r.update({"observation/image": np.zeros((360, 640, 3), np.uint8)}), r"\(540, 640, 3\)"),
        (lambda r: r.update({"observation/image": np.zeros((540, 640, 3), np.float32)}), "uint8"),
        (lambda r: r.update({"observation/joint_position": np.zeros(8, np.float32)}), r"\(7,\)"),
        (lambda r: r.update({"observation/gripper_position": np.array([np.inf], np.float32)}), "NaN or infinite"),
        (lambda r: r.update({"prompt": ""}), "non-empty str"),
    ],
)
def test_validator_rejects_what_the_server_would_not_read(change, message):
    req = request_of(droid_obs())
    change(req)
    with pytest.raises(RequestRejected, match=message):
        validate_cosmos_droid_request(req)


def test_double_replies_with_32_rows_under_action():
    reply = cosmos_reply(request_of(droid_obs()))
    assert sorted(reply) == ["action", "policy_timing"]
    assert reply["action"].dtype == np.float32 and reply["action"].shape == (32, 8)
    assert CosmosDroidAdapter().unpack_actions(reply, CosmosRemotePolicy.server_response_actions_key).shape == (32, 8)


def test_config_defaults_and_horizon():
    config = CosmosRemoteConfig(cosmos_embodiment_adapter="droid")
    assert config.open_loop_horizon == 16 and config.remote_port == 8000
    assert config.ping_timeout_s == 300 and config.first_request_timeout_s >= 600
    assert CosmosRemotePolicy(CosmosRemoteConfig(open_loop_horizon=8)).open_loop_horizon == 8
    assert CosmosRemotePolicy.server_response_actions_key == "action"
    with pytest.raises(ValueError):
        CosmosRemoteConfig(open_loop_horizon=33)


def test_server_task_runs_the_robolab_server_on_the_baked_checkpoint():
    task = cosmos_server_task(CosmosRemoteConfig())
    assert task.render(task.command, host="0.0.0.0", port=8000) == [
        "python", "-m", "cosmos_framework.scripts.action_policy_server_robolab",
        "--checkpoint_path", "/workspace/baked_checkpoint", "--port", "8000", "--format-prompt-as-json", "True",
    ]  # fmt: skip
    assert task.port == 8000 and task.readiness == "websocket" and task.resources.gpu == 1
    assert task.secrets == ["HF_TOKEN"] and task.startup_timeout_s >= 600
    assert task.image is None and "no public" in task.image_hint  # container backends ask for the user's image
