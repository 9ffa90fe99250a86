"""Float and 16-bit camera images never wrap around; every adapter converts through one helper.

The example of issue 17: ``(255 * x).astype(uint8)`` turned float 1.02 into pixel 4, -0.01
into 254 and uint16 40000 into 64.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arena.errors import ObservationError
from arena.images import FLOAT_TOLERANCE, to_uint8
from arena.policies.adapters import ProtocolViolation
from arena.testing.droid import CAMERAS


def test_floats_slightly_outside_the_unit_range_are_clipped_not_wrapped():
    image = np.array([[[1.02, -0.01, 0.5]]], np.float32)
    assert to_uint8(image).tolist() == [[[255, 0, 127]]]


def test_sixteen_bit_values_are_refused_not_wrapped():
    with pytest.raises(ObservationError, match=r"\(uint16\) has values in \[0, 40000\].*0\.\.255"):
        to_uint8(np.array([[[40000, 0, 7]]], np.uint16), "camera_obs['depthish']")


@pytest.mark.parametrize(
    ("image", "why"),
    [
        (np.full((2, 2, 3), 200.0, np.float32), r"float images must be in \[0, 1\]"),
        (np.array([[[np.nan, 0, 0]]]), "NaN or infinite"),
        (np.array([[[-3, 0, 0]]], np.int64), "integer images must be in 0..255"),
        (np.zeros((1, 1, 3), bool), "not a numeric image"),
    ],
)
def test_images_that_cannot_be_converted_faithfully_are_refused(image, why):
    with pytest.raises(ObservationError, match=why):
        to_uint8(image, "camera_obs['cam']")


def test_uint8_is_returned_without_a_copy_and_small_integers_are_cast():
    image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    assert to_uint8(image) is image
    assert to_uint8(image.astype(np.int64)).tolist() == image.tolist()


@given(hnp.arrays(np.float64, (3, 4, 3), elements=st.floats(-FLOAT_TOLERANCE, 1 + FLOAT_TOLERANCE)))
def test_accepted_floats_map_monotonically_onto_the_full_range(image):
    out = to_uint8(image)
    assert out.dtype == np.uint8
    assert out.astype(np.int64).tolist() == np.floor(255 * np.clip(image, 0, 1)).astype(np.int64).tolist()
    order = np.argsort(image, axis=None, kind="stable")
    assert np.all(np.diff(out.reshape(-1)[order].astype(np.int64)) >= 0)  # brighter never becomes darker


@given(hnp.arrays(hnp.integer_dtypes() | hnp.unsigned_integer_dtypes(), (2, 3, 3)))
def test_integer_images_keep_their_values_or_are_refused(image):
    if image.min(initial=0) >= 0 and image.max(initial=0) <= 255:
        assert to_uint8(image).astype(np.int64).tolist() == image.astype(np.int64).tolist()
    else:
        with pytest.raises(ObservationError):
            to_uint8(image)


# -- every adapter goes through it ---------------------------------------------------------------


def _droid_obs(images: np.ndarray, n: int = 1) -> dict:
    return {
        "camera_obs": {name: np.repeat(images[None], n, axis=0) for name in CAMERAS},
        "policy": {"joint_pos": np.zeros((n, 7), np.float32), "gripper_pos": np.zeros((n, 1), np.float32)},
    }


def _openpi_droid(obs):
    from arena_openpi.adapters import OpenPIDroidAdapter

    a = OpenPIDroidAdapter()
    return a.pack_request(a.extract(obs, 0), "go")["observation/exterior_image_1_left"]


def _openpi_libero(obs):
    from arena_openpi.adapters import OpenPILiberoAdapter

    cams = obs["camera_obs"]
    libero = {
        "camera_obs": {"agentview_rgb": cams["external_camera_rgb"], "eye_in_hand_rgb": cams["wrist_camera_rgb"]},
        "policy": {"eef_pos": np.zeros((1, 3)), "eef_quat": np.array([[0, 0, 0, 1.0]]), "gripper_qpos": np.zeros((1, 2))},
    }
    a = OpenPILiberoAdapter()
    return a.pack_request(a.extract(libero, 0), "go")["observation/image"]


def _openpi_aloha(obs):
    from arena_openpi.adapters import OpenPIAlohaAdapter

    aloha = {"camera_obs": {"cam_high_rgb": obs["camera_obs"]["external_camera_rgb"]}, "policy": {"joint_pos": np.zeros((1, 14))}}
    a = OpenPIAlohaAdapter()
    return a.pack_request(a.extract(aloha, 0), "go")["images"]["cam_high"].transpose(1, 2, 0)


def _cosmos(obs):
    from arena_cosmos.adapters import CosmosDroidAdapter

    a = CosmosDroidAdapter()
    return a.pack_request(a.extract(obs, 0), "go")["observation/image"]


def _gr00t(obs):
    from arena_gr00t.adapters import Gr00tDroidAdapter

    return Gr00tDroidAdapter().observation(obs, "go")["video"]["exterior_image_1_left"][0, 0]


def _dreamzero(obs):
    from arena_dreamzero.adapters import DreamZeroDroidAdapter

    return DreamZeroDroidAdapter().frames(obs, 0)["observation/exterior_image_0_left"]


ADAPTERS = [_openpi_droid, _openpi_libero, _openpi_aloha, _cosmos, _gr00t, _dreamzero]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda f: f.__name__.strip("_"))
def test_every_adapter_sends_an_overexposed_float_image_as_white(adapter):
    sent = adapter(_droid_obs(np.full((48, 64, 3), 1.02, np.float32)))
    assert sent.dtype == np.uint8
    centre = sent[sent.shape[0] // 2, sent.shape[1] // 2]
    assert centre.tolist() == [255, 255, 255]  # main sent pixel 4: (255 * 1.02) mod 256


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda f: f.__name__.strip("_"))
def test_every_adapter_refuses_a_sixteen_bit_image_with_the_same_message(adapter):
    with pytest.raises((ObservationError, ProtocolViolation)) as info:
        adapter(_droid_obs(np.full((48, 64, 3), 40000, np.uint16)))
    assert "(uint16) has values in [40000, 40000]; integer images must be in 0..255" in str(info.value)
    assert "never wraps pixel values around" in str(info.value)


def test_the_server_receives_white_for_a_float_image(openpi_double):
    """On the wire: pi0_remote against an openpi-protocol double, a float32 environment."""
    from arena_openpi.policy import Pi0RemoteConfig, Pi0RemotePolicy

    from arena.testing.droid import DroidFakeEnv

    class FloatCameras(DroidFakeEnv):
        def _obs(self):
            obs = super()._obs()
            obs["camera_obs"] = {k: np.full(v.shape, 1.02, np.float32) for k, v in obs["camera_obs"].items()}
            return obs

    double = openpi_double(lambda request: {"actions": np.zeros((15, 8))})
    env = FloatCameras(num_envs=1)
    policy = Pi0RemotePolicy(Pi0RemoteConfig(remote_host=double.host, remote_port=double.port))
    try:
        policy.start(env)
        policy.reset([0], [0])
        policy.get_action(env, env.reset_envs([0], [0]))
    finally:
        policy.close()
    (request,) = double.model.requests
    image = request["observation/wrist_image_left"]
    assert image.dtype == np.uint8 and image[112, 112].tolist() == [255, 255, 255]
