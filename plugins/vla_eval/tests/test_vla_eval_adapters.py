"""The ``vla_eval`` adapters: LIBERO proven equal to vla-eval's own ``LIBEROBenchmark`` (its
``make_obs`` and ``step`` run here on the same raw LIBERO observation; its simulator is not
needed for them), Meta-World and ALOHA checked against vla-eval's documented convention."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.policies.adapters import ProtocolViolation

from arena_vla_eval.adapters import (
    VlaEvalAlohaAdapter,
    VlaEvalLiberoAdapter,
    VlaEvalMetaWorldAdapter,
    quat_to_axisangle,
    quat_to_axisangle_robosuite,
)

pytest.importorskip("vla_eval")


@pytest.fixture(scope="module")
def libero_benchmark_cls():
    """vla-eval's ``LIBEROBenchmark`` (its import sets EGL variables: put them back)."""
    saved = dict(os.environ)
    try:
        from vla_eval.benchmarks.libero.benchmark import LIBEROBenchmark
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return LIBEROBenchmark


def _raw_libero_obs(rng: np.random.Generator, flip_w: bool) -> dict[str, Any]:
    """A raw robosuite/LIBERO observation as ``OffScreenRenderEnv`` returns it (float64 state)."""
    quat = rng.normal(size=4)
    quat /= np.linalg.norm(quat)
    quat[3] = -abs(quat[3]) if flip_w else abs(quat[3])
    return {
        "agentview_image": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "robot0_eye_in_hand_image": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "robot0_eef_pos": rng.normal(size=3),
        "robot0_eef_quat": quat,
        "robot0_gripper_qpos": rng.normal(scale=0.02, size=2),
    }


def _controller(rng: np.random.Generator) -> SimpleNamespace:
    """robosuite's OSC controller pose: ``ee_pos`` and a rotation matrix ``ee_ori_mat`` (float64)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    rot = q * np.sign(np.diag(r))
    rot *= np.sign(np.linalg.det(rot))
    return SimpleNamespace(ee_pos=rng.normal(size=3), ee_ori_mat=rot)


def _arena_layout(raw: dict[str, Any], controller: SimpleNamespace) -> dict[str, Any]:
    """What arena's ``libero`` environment makes of the same raw observation and controller
    (env.py ``_observe_one``: images as rendered, state float64), one env."""
    policy = {k: np.asarray(raw[f"robot0_{k}"], np.float64)[None] for k in ("eef_pos", "eef_quat", "gripper_qpos")}
    policy["controller_eef_pos"] = np.asarray(controller.ee_pos, np.float64)[None]
    policy["controller_eef_ori_mat"] = np.asarray(controller.ee_ori_mat, np.float64).reshape(1, 9)
    return {
        "camera_obs": {
            "agentview_rgb": np.asarray(raw["agentview_image"], np.uint8)[None],
            "eye_in_hand_rgb": np.asarray(raw["robot0_eye_in_hand_image"], np.uint8)[None],
        },
        "policy": policy,
    }


@pytest.mark.parametrize("params", [
    {},
    {"send_wrist_image": True, "send_state": True},
    {"send_state": True, "quat_no_antipodal": True},
])
@pytest.mark.parametrize("flip_w", [False, True])
def test_libero_requests_equal_what_vla_evals_libero_benchmark_sends(libero_benchmark_cls, params, flip_w):
    rng = np.random.default_rng(3)
    raw = _raw_libero_obs(rng, flip_w)
    bench = libero_benchmark_cls(**params)
    controller = _controller(rng)
    bench._env = SimpleNamespace(robots=[SimpleNamespace(controller=controller)])
    theirs = bench.make_obs(raw, {"name": "put the bowl on the plate"})

    adapter = VlaEvalLiberoAdapter()
    assert adapter.configure(params, None) == []
    ours = adapter.pack_request(adapter.extract(_arena_layout(raw, controller), 0), "put the bowl on the plate")

    assert set(ours) == set(theirs)  # with send_state: controller_states too (X-VLA's)
    assert ours["task_description"] == theirs["task_description"]
    assert ours["images"].keys() == theirs["images"].keys()
    for name, image in theirs["images"].items():
        assert ours["images"][name].dtype == image.dtype and np.array_equal(ours["images"][name], image)
    if "states" in theirs:
        assert ours["states"].dtype == theirs["states"].dtype
        assert np.array_equal(ours["states"], theirs["states"])
        assert ours["controller_states"].dtype == theirs["controller_states"].dtype == np.float32
        assert np.array_equal(ours["controller_states"], theirs["controller_states"])


@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=7, max_size=7))
@settings(max_examples=40, deadline=None)
def test_libero_actions_reach_the_simulator_as_vla_evals_step_hands_them(libero_benchmark_cls, values):
    from vla_eval.recording import NullEpisodeRecorder

    sent: list[list[float]] = []
    raw = _raw_libero_obs(np.random.default_rng(0), False)
    bench = libero_benchmark_cls()
    bench._recorder = NullEpisodeRecorder()
    bench._env = SimpleNamespace(step=lambda a: (sent.append(list(a)), (raw, 0.0, False, {}))[1])
    action = np.asarray(values, np.float32)
    bench.step({"actions": action})
    ours = VlaEvalLiberoAdapter().unpack_actions({"actions": action})
    assert ours.shape == (1, 7)
    assert ours[0].tolist() == sent[0]


def test_quat_to_axisangle_is_vla_evals():
    from vla_eval.rotation import quat_to_axisangle as theirs

    rng = np.random.default_rng(5)
    for _ in range(200):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        assert np.array_equal(quat_to_axisangle(q), theirs(q))
    assert np.array_equal(quat_to_axisangle(np.array([0, 0, 0, 1.0])), theirs(np.array([0, 0, 0, 1.0])))


def test_quat_to_axisangle_robosuite_is_vla_evals(libero_benchmark_cls):
    """Arena's one robosuite formula (arena.rotations), cast as vla-eval's LIBERO benchmark
    does, equals vla-eval's ``_quat_to_axisangle_robosuite`` for float64 and float32 input."""
    theirs = sys.modules[libero_benchmark_cls.__module__]._quat_to_axisangle_robosuite
    rng = np.random.default_rng(6)
    for dtype in (np.float64, np.float32):
        for _ in range(100):
            q = rng.normal(size=4)
            q = (q / np.linalg.norm(q)).astype(dtype)
            ours = quat_to_axisangle_robosuite(q)
            assert ours.dtype == np.float32 and ours.tobytes() == theirs(q).tobytes()
        identity = np.array([0, 0, 0, 1], dtype)
        assert quat_to_axisangle_robosuite(identity).tobytes() == theirs(identity).tobytes()


def test_metaworld_sends_every_rendered_camera_and_the_39_dim_state():
    obs = {
        "policy": {"state": np.arange(78, dtype=np.float64).reshape(2, 39)},
        "camera_obs": {"corner": np.full((2, 16, 16, 3), 7, np.uint8)},
    }
    adapter = VlaEvalMetaWorldAdapter()
    request = adapter.pack_request(adapter.extract(obs, 1), "Reach the goal.")
    assert request["images"]["corner"].shape == (16, 16, 3) and (request["images"]["corner"] == 7).all()
    assert request["states"].dtype == np.float64 and request["states"][0] == 39.0
    assert request["task_description"] == "Reach the goal."
    adapter.configure({"send_state": False}, None)
    assert "states" not in adapter.extract(obs, 0)


def test_aloha_sends_its_cameras_by_name_and_the_14_joint_state():
    obs = {
        "camera_obs": {"cam_high_rgb": np.zeros((1, 12, 16, 3), np.uint8), "cam_left_wrist_rgb": np.ones((1, 12, 16, 3), np.uint8)},
        "policy": {"joint_pos": np.linspace(0, 1, 14)[None]},
    }
    adapter = VlaEvalAlohaAdapter()
    request = adapter.pack_request(adapter.extract(obs, 0), "transfer the cube")
    assert sorted(request["images"]) == ["cam_high", "cam_left_wrist"]
    assert request["states"].shape == (14,)
    with pytest.raises(KeyError, match="cam_high_rgb"):
        adapter.extract({"camera_obs": {}, "policy": obs["policy"]}, 0)


def test_run_params_win_over_the_servers_and_unknown_ones_are_reported():
    adapter = VlaEvalLiberoAdapter()
    unknown = adapter.configure({"send_state": True, "send_depth": True}, {"send_state": False})
    assert adapter.params["send_state"] is False
    assert unknown == ["send_depth"]


@pytest.mark.parametrize("reply, match", [
    ({}, "no 'actions'"),
    ({"actions": np.zeros((3, 4), np.float32)}, "chunk of 3 rows"),
    ({"actions": np.zeros(5, np.float32)}, r"expected \(4,\)"),
    ({"actions": np.array([0, 0, np.nan, 0], np.float32)}, "NaN"),
    ({"actions": np.zeros(4, np.int32)}, "float array"),
])
def test_a_reply_that_is_not_one_action_is_a_protocol_violation(reply, match):
    with pytest.raises(ProtocolViolation, match=match):
        VlaEvalMetaWorldAdapter().unpack_actions(reply)


@pytest.mark.parametrize("seed", range(24))
def test_matrix_to_quat_is_vla_evals_in_every_branch(seed):
    from vla_eval.rotation import matrix_to_quat as theirs

    from arena_vla_eval.adapters import matrix_to_quat

    rng = np.random.default_rng(seed)
    rot = _controller(rng).ee_ori_mat
    if seed % 4:  # half-turns about x, y or z: the trace is negative, the other three branches
        axis = np.zeros(3)
        axis[seed % 4 - 1] = 1.0
        rot = 2.0 * np.outer(axis, axis) - np.eye(3)
    for m in (rot, rot.astype(np.float32)):
        assert np.array_equal(matrix_to_quat(m), theirs(m))
