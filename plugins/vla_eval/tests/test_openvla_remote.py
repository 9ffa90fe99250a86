"""``openvla_remote`` against doubles of OpenVLA's and OpenVLA-OFT's deploy servers
(:mod:`arena_vla_eval.openvla.testing`, FastAPI + uvicorn + json_numpy like the real files): one action
per request (OpenVLA), action chunks replayed open loop (OFT LIBERO 8 x 7, ALOHA 25 x 14), the
``"error"`` body as an error episode, the ``encoded`` variant, and what the adapters send."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from arena.errors import ConfigError, PolicyError
from arena.testing.plugin_tests import robosuite_quat2axisangle  # OFT's quat2axisangle is robosuite's
from arena.transport.interface import WireClient

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from arena_vla_eval.openvla.adapters import OftLiberoAdapter, OpenVLALiberoAdapter, quat2axisangle  # noqa: E402
from arena_vla_eval.openvla.client import OpenVLAHttpClient, decode_json_numpy, encode_body  # noqa: E402
from arena_vla_eval.openvla.policy import OpenVLARemoteConfig, OpenVLARemotePolicy  # noqa: E402
from arena_vla_eval.openvla.testing import DeployDouble  # noqa: E402

pytestmark = pytest.mark.timeout(120)
INSTRUCTION = "put the bowl on the plate"


class _Env:
    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def _libero_obs(num_envs: int = 1, size: int = 32) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    quat = np.tile([0.0, 0.6, 0.0, 0.8], (num_envs, 1))
    return {
        "camera_obs": {
            "agentview_rgb": rng.integers(0, 256, (num_envs, size, size, 3), dtype=np.uint8),
            "eye_in_hand_rgb": rng.integers(0, 256, (num_envs, size, size, 3), dtype=np.uint8),
        },
        "policy": {"eef_pos": np.ones((num_envs, 3)), "eef_quat": quat, "gripper_qpos": np.full((num_envs, 2), 0.02)},
    }


def _aloha_obs(num_envs: int = 1) -> dict[str, Any]:
    cams = {f"{c}_rgb": np.zeros((num_envs, 48, 64, 3), np.uint8) for c in ("cam_high", "cam_left_wrist", "cam_right_wrist")}
    return {"camera_obs": cams, "policy": {"joint_pos": np.tile(np.linspace(0, 1, 14), (num_envs, 1))}}


def _policy(double: DeployDouble, embodiment: str, num_envs: int = 1, **options: Any) -> OpenVLARemotePolicy:
    config = OpenVLARemoteConfig(
        embodiment=embodiment, remote_host=double.host, remote_port=double.port, connect_timeout_s=10,
        first_request_timeout_s=30, request_timeout_s=30, **options,
    )
    policy = OpenVLARemotePolicy(config)
    policy.start(_Env(num_envs))
    policy.set_task_description(INSTRUCTION)
    policy.reset(list(range(num_envs)))
    return policy


def test_openvla_answers_one_action_per_request_with_the_libero_gripper_processed():
    with DeployDouble("openvla", norm_keys=("libero_spatial", "libero_10")) as double:
        policy = _policy(double, "libero", unnorm_key="libero_spatial")
        actions = [policy.get_action(None, _libero_obs())[0] for _ in range(3)]
        policy.close()
    assert len(double.requests) == 3  # one request per step
    request = double.requests[0]
    assert sorted(request) == ["image", "instruction", "unnorm_key"]
    assert request["image"].dtype == np.uint8 and request["image"].shape == (224, 224, 3)
    assert request["instruction"] == INSTRUCTION and request["unnorm_key"] == "libero_spatial"
    # the model's gripper 1.0 (OpenVLA's "open") reaches LIBERO as -1 (LIBERO's "open")
    assert [a[-1] for a in actions] == [-1.0, -1.0, -1.0]
    assert [round(a[0], 2) for a in actions] == [0.01, 0.02, 0.03]


def test_oft_libero_chunks_of_8_are_replayed_open_loop():
    with DeployDouble("oft", platform="libero") as double:
        policy = _policy(double, "oft_libero")
        actions = [policy.get_action(None, _libero_obs())[0] for _ in range(10)]
        info = policy.episode_info(0)
        policy.close()
    assert len(double.requests) == 2  # steps 0 and 8
    assert [round(a[1], 2) for a in actions] == [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.0, 0.01]
    request = double.requests[0]
    assert sorted(request) == ["full_image", "instruction", "state", "wrist_image"]
    assert request["state"].shape == (8,) and request["state"].dtype == np.float64
    assert "unnorm_key" not in request  # fixed when an OFT server starts
    assert info["serving"] == "chunk" and info["latency"]["requests"] == 2


def test_oft_aloha_chunks_of_25_by_14_are_replayed_open_loop():
    with DeployDouble("oft", platform="aloha") as double:
        policy = _policy(double, "oft_aloha", num_envs=2)
        for _ in range(26):
            actions = policy.get_action(None, _aloha_obs(2))
        policy.close()
    assert len(double.requests) == 4  # 2 envs x steps 0 and 25
    assert actions.shape == (2, 14) and round(actions[0, 1], 2) == 0.0
    assert sorted(double.requests[0]) == ["full_image", "instruction", "left_wrist_image", "right_wrist_image", "state"]


def test_an_error_body_makes_the_episode_an_error_never_an_action():
    with DeployDouble("oft", platform="libero", fail_on_request=2) as double:
        policy = _policy(double, "oft_libero", max_reconnect_attempts=0)
        for _ in range(8):
            policy.get_action(None, _libero_obs())
        with pytest.raises(PolicyError, match='answered "error"') as err:
            policy.get_action(None, _libero_obs())
        policy.reset([0])
        assert policy.get_action(None, _libero_obs()).shape == (1, 7)  # the next episode goes on
        policy.close()
    assert err.value.env_ids == [0]


def test_the_encoded_variant_is_answered_double_encoded():
    with DeployDouble("openvla") as double:
        policy = _policy(double, "libero", encoded=True)
        action = policy.get_action(None, _libero_obs())
        policy.close()
    assert double.encoded_requests == 1
    assert action.shape == (1, 7) and action[0, -1] == -1.0


def test_a_reply_of_another_chunk_length_is_a_protocol_violation():
    with DeployDouble("oft", platform="libero", chunk=5) as double:  # 5 x 7 chunks (Bridge's), not LIBERO's 8
        policy = _policy(double, "oft_libero")
        with pytest.raises(PolicyError, match="expected 8"):
            policy.get_action(None, _libero_obs())
        policy.close()


def test_no_server_is_a_clear_error_and_ports_default_to_the_servers():
    assert OpenVLARemoteConfig(embodiment="libero").port() == 8000
    assert OpenVLARemoteConfig(embodiment="oft_aloha").port() == 8777
    client = OpenVLAHttpClient("127.0.0.1", 1, connect_timeout_s=0.3)
    assert isinstance(client, WireClient)
    with pytest.raises(Exception, match="no server accepted"):
        client.connect()
    with pytest.raises(ValueError, match="exceeds the 8 actions"):
        OpenVLARemoteConfig(embodiment="oft_libero", open_loop_horizon=9)


def test_bodies_are_json_numpy_and_refuse_object_arrays():
    body = json.loads(encode_body({"state": np.arange(3, dtype=np.float32), "instruction": "x"}))
    assert set(body["state"]) == {"__numpy__", "dtype", "shape"} and body["state"]["dtype"] == "<f4"
    assert np.array_equal(decode_json_numpy(json.dumps(body))["state"], np.arange(3, dtype=np.float32))
    encoded = json.loads(encode_body({"a": np.zeros(2)}, encoded=True))
    assert list(encoded) == ["encoded"] and isinstance(encoded["encoded"], str)
    with pytest.raises(Exception, match="refused"):
        decode_json_numpy('{"__numpy__": "", "dtype": "|O", "shape": [0]}')


def test_the_libero_adapters_follow_the_oft_client():
    rng = np.random.default_rng(2)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        assert np.array_equal(quat2axisangle(q), robosuite_quat2axisangle(q.copy()))
    obs = _libero_obs(size=224)
    y, x = np.mgrid[0:224, 0:224]
    smooth = np.stack([x, y, (x + y) // 2], axis=-1).astype(np.uint8)  # JPEG keeps smooth images closely
    obs["camera_obs"]["agentview_rgb"] = smooth[None]
    frame = OftLiberoAdapter().extract(obs, 0)
    request = OftLiberoAdapter().pack_request(frame, INSTRUCTION)
    # rotated 180 degrees (no resize at 224; a JPEG round trip at quality 95 changes values a little)
    flipped = obs["camera_obs"]["agentview_rgb"][0][::-1, ::-1].astype(int)
    assert np.abs(request["full_image"].astype(int) - flipped).mean() < 2
    assert np.abs(request["full_image"].astype(int) - smooth.astype(int)).mean() > 50  # and not unflipped
    # OFT's process_action: gripper [0, 1] -> [-1, 1], sign, inverted
    chunk = OpenVLALiberoAdapter().postprocess(np.array([[0.0] * 6 + [0.9], [0.0] * 6 + [0.1]]))
    assert chunk[:, -1].tolist() == [-1.0, 1.0]
    with pytest.raises(ConfigError, match="checkpoint"):
        from arena_vla_eval.openvla.servertask import openvla_server_task

        openvla_server_task(OpenVLARemoteConfig(embodiment="libero"))


def test_the_server_task_runs_deploy_py_and_waits_for_the_app():
    from arena_vla_eval.openvla.servertask import openvla_server_task

    task = openvla_server_task(
        OpenVLARemoteConfig(embodiment="oft_libero", checkpoint="moojink/openvla-7b-oft-finetuned-libero-spatial",
                            unnorm_key="libero_spatial", server_repo_dir="/opt/openvla-oft")
    )
    line = task.render(task.local_command, host="127.0.0.1", port=8777)[-1]
    assert line == (
        "cd /opt/openvla-oft && exec python vla-scripts/deploy.py --host 127.0.0.1 --port 8777 "
        "--pretrained_checkpoint moojink/openvla-7b-oft-finetuned-libero-spatial --unnorm_key libero_spatial_no_noops "
        "--num_images_in_input 2 --use_proprio True"
    )
    assert task.readiness == "http:/openapi.json" and task.port == 8777


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", ">f8"])
def test_replies_decode_as_json_numpy_writes_them(dtype):
    import json_numpy

    rng = np.random.default_rng(4)
    for shape in [(), (7,), (8, 7), (2, 3, 4)]:
        array = rng.normal(size=shape).astype(dtype) if shape else np.asarray(rng.normal()).astype(dtype)
        got = decode_json_numpy(json_numpy.dumps({"a": array, "l": [array]}))
        theirs = json_numpy.loads(json_numpy.dumps(array))  # json_numpy's own decoder: the reference
        for value in (got["a"], got["l"][0]):
            assert type(value) is type(theirs) and np.asarray(value).dtype == np.asarray(theirs).dtype
            assert np.array_equal(value, array)
