"""OpenVLA's LIBERO center crop, client-side: the image OpenVLA's own ``deploy.py`` hands its
processor is the one OpenVLA's ``get_vla_action`` would (openvla ``openvla_utils.py`` @ c8f03f4
l.135-155, run under TensorFlow 2.21 by ``reference/make_golden.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from arena_vla_eval.openvla.adapters import center_crop, resize_for_policy  # noqa: E402
from arena_vla_eval.openvla.policy import OpenVLARemoteConfig, OpenVLARemotePolicy  # noqa: E402
from arena_vla_eval.openvla.servertask import openvla_server_task  # noqa: E402
from arena_vla_eval.openvla.testing import DeployDouble  # noqa: E402
from openvla_deploy_harness import OPENVLA, free_port, start, stop, wait_ready  # noqa: E402

pytestmark = pytest.mark.timeout(120)
REFERENCE = Path(__file__).parent / "reference"


class _Env:
    num_envs = 1


def _frames_sent(**options: object) -> tuple[np.ndarray, np.ndarray, dict]:
    frame = np.random.default_rng(3).integers(0, 256, (1, 128, 128, 3), dtype=np.uint8)
    obs = {"camera_obs": {"agentview_rgb": frame}}
    with DeployDouble("openvla") as double:
        config = OpenVLARemoteConfig(embodiment="libero", remote_host=double.host, remote_port=double.port, **options)
        policy = OpenVLARemotePolicy(config)
        policy.start(_Env())
        policy.set_task_description("open the drawer")
        policy.reset([0])
        policy.get_action(None, obs)
        info = policy.episode_info(0)
        policy.close()
    return frame[0], double.requests[0]["image"], info


def test_openvla_libero_requests_carry_the_center_crop_by_default():
    frame, sent, info = _frames_sent()
    resized = resize_for_policy(frame[::-1, ::-1])  # OpenVLA's get_libero_image: rotate, resize to 224
    assert sent.dtype == np.uint8 and sent.shape == (224, 224, 3)
    assert np.array_equal(sent, center_crop(resized))
    assert not np.array_equal(sent, resized)
    assert info["center_crop"] is True  # the episode record says which preprocessing it had


def test_openvlas_deploy_py_hands_its_processor_the_cropped_frame(tmp_path):
    port = free_port()
    config = OpenVLARemoteConfig(embodiment="libero", checkpoint="openvla/openvla-7b-finetuned-libero-spatial",
                                 unnorm_key="libero_spatial", server_repo_dir=str(OPENVLA), server_python=sys.executable)
    task = openvla_server_task(config)
    proc = start(task.render(task.local_command, host="127.0.0.1", port=port), OPENVLA, {"OPENVLA_STUB_CAPTURE": str(tmp_path)})
    frames = np.random.default_rng(5).integers(0, 256, (2, 1, 96, 96, 3), dtype=np.uint8)
    try:
        wait_ready(proc, port)
        policy = OpenVLARemotePolicy(config.model_copy(update={"remote_host": "127.0.0.1", "remote_port": port}))
        policy.start(_Env())
        policy.set_task_description("Put the bowl on the plate")
        policy.reset([0])
        actions = [policy.get_action(None, {"camera_obs": {"agentview_rgb": frame}})[0] for frame in frames]
        policy.close()
    finally:
        print(stop(proc))
    for n, frame in enumerate(frames, start=1):
        received = np.load(tmp_path / f"{n}.npy")  # what deploy.py's Image.fromarray(image).convert("RGB") gave
        assert np.array_equal(received, center_crop(resize_for_policy(frame[0][::-1, ::-1])))
        assert (tmp_path / f"{n}.txt").read_text() == "In: What action should the robot take to put the bowl on the plate?\nOut:"
    assert [round(a[0], 2) for a in actions] == [0.01, 0.02] and actions[0][-1] == -1.0


def test_center_crop_false_sends_the_uncropped_image_and_records_it():
    frame, sent, info = _frames_sent(center_crop=False)
    assert np.array_equal(sent, resize_for_policy(frame[::-1, ::-1]))
    assert info["center_crop"] is False


def test_the_crop_is_bit_identical_to_openvlas_get_vla_action_under_tensorflow():
    sys.path.insert(0, str(REFERENCE))
    try:
        from make_golden import frames
    finally:
        sys.path.remove(str(REFERENCE))
    golden = np.load(REFERENCE / "openvla_center_crop_golden.npz")
    reference = golden["crops"]
    inputs = frames()
    assert reference.shape == inputs.shape == (3, 224, 224, 3)
    for image, expected in zip(inputs, reference):
        assert np.array_equal(center_crop(image), expected)
        assert np.abs(image.astype(int) - expected).mean() > 1  # the crop changed the frame


def test_the_crop_matches_openvla_live_where_tensorflow_is_installed():
    pytest.importorskip("tensorflow")  # optional: the golden test above holds the same check offline
    sys.path.insert(0, str(REFERENCE))
    try:
        from make_golden import reference_crops
    finally:
        sys.path.remove(str(REFERENCE))
    images = np.random.default_rng(1).integers(0, 256, (4, 224, 224, 3), dtype=np.uint8)
    for image, expected in zip(images, reference_crops(images)):
        assert np.array_equal(center_crop(image), expected)


def test_center_crop_refuses_what_it_cannot_crop():
    with pytest.raises(ValueError, match="uint8"):
        center_crop(np.zeros((224, 224, 3), np.float32))
    with pytest.raises(ValueError, match="crop_scale"):
        center_crop(np.zeros((224, 224, 3), np.uint8), crop_scale=0.0)
