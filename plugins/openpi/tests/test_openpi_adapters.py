"""openpi adapters send exactly what openpi's example clients send; horizons and server task per variant."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
import pytest

from arena.errors import ConfigError
from arena_openpi.adapters import (
    OpenPIAlohaAdapter,
    OpenPIDroidAdapter,
    OpenPILiberoAdapter,
    quat_to_axis_angle,
)
from arena.images import resize_with_pad
from arena.testing.plugin_tests import robosuite_quat2axisangle
from arena_openpi.policy import Pi0RemoteConfig, Pi0RemotePolicy
from arena_openpi.server import openpi_server_task
from arena_openpi.testing import VALIDATORS, RequestRejected, reply_factory

RNG = np.random.default_rng(0)


def frames(n: int, h: int, w: int) -> np.ndarray:
    return RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def droid_obs(n: int = 2, h: int = 180, w: int = 320) -> dict:
    """The franka_kitchen (DROID) layout."""
    return {
        "camera_obs": {
            "external_camera_rgb": frames(n, h, w),
            "external_camera_2_rgb": frames(n, h, w),
            "wrist_camera_rgb": frames(n, h, w),
        },
        "policy": {
            "joint_pos": RNG.normal(size=(n, 7)).astype(np.float32),
            "gripper_pos": RNG.uniform(size=(n, 1)).astype(np.float32),
        },
    }


def libero_obs(n: int = 2) -> dict:
    """The documented LIBERO layout (synthetic: LIBERO renders agentview at 256 x 256)."""
    quat = RNG.normal(size=(n, 4))
    return {
        "camera_obs": {"agentview_rgb": frames(n, 256, 256), "eye_in_hand_rgb": frames(n, 256, 256)},
        "policy": {
            "eef_pos": RNG.normal(size=(n, 3)),
            "eef_quat": quat / np.linalg.norm(quat, axis=1, keepdims=True),
            "gripper_qpos": RNG.uniform(0, 0.04, size=(n, 2)),
        },
    }


def aloha_obs(n: int = 2, cameras=("cam_high", "cam_left_wrist", "cam_right_wrist")) -> dict:
    """The documented ALOHA layout (synthetic: ALOHA cameras are 480 x 640)."""
    return {
        "camera_obs": {f"{c}_rgb": frames(n, 480, 640) for c in cameras},
        "policy": {"joint_pos": RNG.normal(size=(n, 14))},
    }


def request_of(adapter, obs, env_id=1, prompt="do it"):
    return adapter.pack_request(adapter.extract(obs, env_id), prompt)


# -- resize-with-pad ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(180, 320), (64, 96), (480, 640), (256, 256), (300, 100), (224, 224)])
def test_resize_with_pad_matches_openpi_client(shape):
    image_tools = pytest.importorskip("openpi_client.image_tools")
    image = frames(1, *shape)[0]
    ours = resize_with_pad(image, 224, 224)
    theirs = image_tools.resize_with_pad(image, 224, 224)
    assert ours.dtype == np.uint8 and ours.shape == (224, 224, 3)
    assert np.array_equal(ours, theirs)


# -- DROID --------------------------------------------------------------------------------------


def test_droid_request_has_exactly_the_example_keys_dtypes_and_sizes():
    obs = droid_obs()
    req = request_of(OpenPIDroidAdapter(), obs)
    assert sorted(req) == sorted(
        [
            "observation/exterior_image_1_left",
            "observation/wrist_image_left",
            "observation/joint_position",
            "observation/gripper_position",
            "prompt",
        ]
    )
    for key in ("observation/exterior_image_1_left", "observation/wrist_image_left"):
        assert req[key].dtype == np.uint8 and req[key].shape == (224, 224, 3)
    assert np.array_equal(
        req["observation/exterior_image_1_left"], resize_with_pad(obs["camera_obs"]["external_camera_rgb"][1], 224, 224)
    )
    assert np.array_equal(
        req["observation/wrist_image_left"], resize_with_pad(obs["camera_obs"]["wrist_camera_rgb"][1], 224, 224)
    )
    assert req["observation/joint_position"].dtype == np.float64 and req["observation/joint_position"].shape == (7,)
    assert req["observation/gripper_position"].dtype == np.float64 and req["observation/gripper_position"].shape == (1,)
    np.testing.assert_allclose(req["observation/joint_position"], obs["policy"]["joint_pos"][1])
    assert req["prompt"] == "do it"
    VALIDATORS["droid"](req)


def test_droid_request_is_packable_on_the_wire():
    from arena.transport import packb, unpackb

    req = request_of(OpenPIDroidAdapter(), droid_obs())
    back = unpackb(packb(req))
    assert back["observation/wrist_image_left"].shape == (224, 224, 3) and back["prompt"] == "do it"


# -- LIBERO -------------------------------------------------------------------------------------


def test_libero_request_rotates_images_and_builds_the_8_dim_state():
    obs = libero_obs()
    req = request_of(OpenPILiberoAdapter(), obs)
    assert sorted(req) == ["observation/image", "observation/state", "observation/wrist_image", "prompt"]
    expected = resize_with_pad(np.ascontiguousarray(obs["camera_obs"]["agentview_rgb"][1][::-1, ::-1]), 224, 224)
    assert np.array_equal(req["observation/image"], expected)
    assert req["observation/wrist_image"].shape == (224, 224, 3) and req["observation/wrist_image"].dtype == np.uint8
    state = req["observation/state"]
    assert state.dtype == np.float64 and state.shape == (8,)
    np.testing.assert_allclose(state[:3], obs["policy"]["eef_pos"][1])
    np.testing.assert_allclose(state[6:], obs["policy"]["gripper_qpos"][1])
    VALIDATORS["libero"](req)


def test_quat_to_axis_angle():
    angle = 0.7
    axis = np.array([0.0, 0.6, 0.8])
    quat = np.concatenate([np.sin(angle / 2) * axis, [np.cos(angle / 2)]])  # (x, y, z, w)
    np.testing.assert_allclose(quat_to_axis_angle(quat), axis * angle, atol=1e-12)
    assert quat_to_axis_angle([0, 0, 0, 1]).tolist() == [0, 0, 0]


unit = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=True)


@given(st.tuples(unit, unit, unit, unit).filter(lambda q: sum(x * x for x in q) > 1e-6), st.booleans())
def test_quat_to_axis_angle_is_bit_for_bit_openpis(components, near_identity):
    quat = np.array(components, np.float64)
    quat /= np.linalg.norm(quat)
    if near_identity:  # the 1-2 ulp cases of issue 23: w within rounding of 1
        quat = np.array([quat[0] * 1e-9, quat[1] * 1e-9, quat[2] * 1e-9, 1.0 - 1e-17])
    theirs = robosuite_quat2axisangle(quat.copy())  # openpi's _quat2axisangle is robosuite's
    ours = quat_to_axis_angle(quat)
    assert ours.dtype == theirs.dtype == np.float64 and ours.tobytes() == theirs.tobytes()


def test_quat_to_axis_angle_leaves_its_argument_alone_and_clips_w():
    quat = np.array([0.0, 0.0, 1e-20, 1.0 + 1e-15])
    assert quat_to_axis_angle(quat).tolist() == [0.0, 0.0, 0.0]
    assert quat[3] == 1.0 + 1e-15


# -- ALOHA --------------------------------------------------------------------------------------


def test_aloha_request_nests_chw_images_and_sends_the_14_dim_state():
    req = request_of(OpenPIAlohaAdapter(), aloha_obs())
    assert sorted(req) == ["images", "prompt", "state"]
    assert sorted(req["images"]) == ["cam_high", "cam_left_wrist", "cam_right_wrist"]
    for image in req["images"].values():
        assert image.dtype == np.uint8 and image.shape == (3, 224, 224)
    assert req["state"].dtype == np.float64 and req["state"].shape == (14,)
    VALIDATORS["aloha"](req)


def test_aloha_needs_the_high_camera():
    with pytest.raises(KeyError, match="cam_high_rgb"):
        OpenPIAlohaAdapter().extract(aloha_obs(cameras=("cam_low",)), 0)


# -- the double's validator ------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda r: r.pop("observation/wrist_image_left"), "no 'observation/wrist_image_left'"),
        (lambda r: r.update({"observation/exterior_image_1_left": np.zeros((180, 320, 3), np.uint8)}), r"\(224, 224, 3\)"),
        (lambda r: r.update({"observation/wrist_image_left": np.zeros((224, 224, 3), np.float32)}), "uint8"),
        (lambda r: r.update({"observation/joint_position": np.zeros(8)}), r"\(7,\)"),
        (lambda r: r.update({"observation/joint_position": np.full(7, np.nan)}), "NaN"),
        (lambda r: r.pop("prompt"), "Prompt is required"),
    ],
)
def test_droid_validator_rejects_what_the_server_would_not_read(change, message):
    req = request_of(OpenPIDroidAdapter(), droid_obs())
    change(req)
    with pytest.raises(RequestRejected, match=message):
        VALIDATORS["droid"](req)


def test_aloha_validator_rejects_unknown_cameras():
    req = request_of(OpenPIAlohaAdapter(), aloha_obs())
    req["images"]["cam_top"] = req["images"]["cam_high"]
    with pytest.raises(RequestRejected, match="unknown ALOHA camera 'cam_top'"):
        VALIDATORS["aloha"](req)


@pytest.mark.parametrize(
    "embodiment, variant, shape",
    [("droid", "pi05", (15, 8)), ("droid", "pi0", (10, 8)), ("libero", "pi05", (10, 7)), ("aloha", "pi0", (50, 14))],
)
def test_double_replies_like_the_checkpoint(embodiment, variant, shape):
    adapter = {"droid": OpenPIDroidAdapter, "libero": OpenPILiberoAdapter, "aloha": OpenPIAlohaAdapter}[embodiment]()
    obs = {"droid": droid_obs, "libero": libero_obs, "aloha": aloha_obs}[embodiment]()
    reply = reply_factory(embodiment, variant)(request_of(adapter, obs))
    assert reply["actions"].dtype == np.float64 and reply["actions"].shape == shape
    assert isinstance(reply["policy_timing"]["infer_ms"], float)
    assert adapter.unpack_actions(reply, "actions").shape == shape


# -- horizons and the server task -----------------------------------------------------------


@pytest.mark.parametrize(
    "embodiment, variant, horizon",
    [("droid", "pi05", 15), ("droid", "pi0", 10), ("libero", "pi05", 5), ("libero", "pi0", 5), ("aloha", "pi0", 10)],
)
def test_horizon_follows_the_variant(embodiment, variant, horizon):
    config = Pi0RemoteConfig(policy_variant=variant, openpi_embodiment_adapter=embodiment)
    assert Pi0RemotePolicy(config).open_loop_horizon == horizon


def test_explicit_horizon_wins_and_unknown_variants_are_rejected():
    assert Pi0RemotePolicy(Pi0RemoteConfig(policy_variant="pi05", open_loop_horizon=8)).open_loop_horizon == 8
    with pytest.raises(ValueError, match="policy_variant"):
        Pi0RemoteConfig(policy_variant="pi0_fast")


def test_client_defaults_survive_a_compiling_server():
    config = Pi0RemoteConfig()
    assert (config.policy_variant, config.embodiment, config.remote_port) == ("pi05", "droid", 8000)
    assert config.ping_timeout_s == 300 and config.first_request_timeout_s >= 600
    assert Pi0RemotePolicy.server_response_actions_key == "actions"


@pytest.mark.parametrize(
    "variant, cfg, ckpt",
    [
        ("pi05", "pi05_droid_jointpos_polaris", "gs://openpi-assets-simeval/pi05_droid_jointpos"),
        ("pi0", "pi0_droid_jointpos_polaris", "gs://openpi-assets-simeval/pi0_droid_jointpos"),
    ],
)
def test_server_task_serves_the_variants_checkpoint(variant, cfg, ckpt):
    task = openpi_server_task(Pi0RemoteConfig(policy_variant=variant))
    argv = task.render(task.command, host="0.0.0.0", port=8000)
    assert argv == [
        "uv", "run", "--directory", "/app", "scripts/serve_policy.py", "--port=8000", "policy:checkpoint",
        f"--policy.config={cfg}", f"--policy.dir={ckpt}",
    ]  # fmt: skip
    assert task.port == 8000 and task.readiness == "websocket" and task.resources.gpu == 1
    assert task.startup_timeout_s >= 600
    assert task.env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"
    local = task.render(task.local_command, host="127.0.0.1", port=9000)
    assert local[:4] == ["uv", "run", "--directory", "openpi"] and "--port=9000" in local


def test_server_task_without_a_known_checkpoint_is_a_config_error():
    with pytest.raises(ConfigError, match="aloha.*pi05"):
        openpi_server_task(Pi0RemoteConfig(policy_variant="pi05", embodiment="aloha"))
