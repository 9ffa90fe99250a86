"""The LeRobot embodiment adapters on Arena-layout observations (arena's interpreter, no torch):
registration, the request each sends (names, dtypes, shapes, flips, state), the refusals, and
actions both ways. Equality with LeRobot's own processing: test_lerobot_adapters_equivalence.py."""

from __future__ import annotations


from types import SimpleNamespace

import numpy as np
import pytest

from arena.errors import ObservationError
from arena.plugins import get_registry
from arena.testing.plugin_tests import listed_plugin
from arena.policies.adapters import ProtocolViolation
from arena_lerobot.adapters import (
    ADAPTERS,
    FAMILY,
    LEROBOT_METAWORLD_TASKS,
    LeRobotMetaWorldAdapter,
    libero_state,
)

RNG = np.random.default_rng(0)


def image(n: int, h: int, w: int) -> np.ndarray:
    return RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def requests(name: str, observation: dict, instruction: str = "do it", **kwargs) -> list[dict]:
    adapter = ADAPTERS[name](**kwargs)
    return [adapter.pack_request(adapter.extract(observation, i), instruction) for i in range(2)]


def test_every_adapter_is_registered_under_the_lerobot_family():
    registry = get_registry()
    for name in ("aloha", "pusht", "libero", "metaworld", "metaworld_environment_state"):
        assert registry.adapter(FAMILY, name) is ADAPTERS[name]
    assert {ADAPTERS[n].action_dim for n in ("aloha", "pusht", "libero", "metaworld")} == {14, 2, 7, 4}


def test_arena_plugins_lists_the_adapters():
    plugin = listed_plugin("lerobot")
    assert plugin["distribution"] == "arena-plugin-lerobot"
    listed = plugin["registered"]["embodiment_adapters"]
    assert {f"lerobot/{name}" for name in ADAPTERS} <= set(listed), listed


def test_aloha_sends_the_top_camera_and_the_14_dim_state_with_the_envs_task_name():
    cams, joints = image(2, 48, 64), RNG.normal(size=(2, 14))
    obs = {"camera_obs": {"cam_high_rgb": cams, "cam_low_rgb": image(2, 48, 64)}, "policy": {"joint_pos": joints},
           "task": ["transfer_cube"] * 2}
    r = requests("aloha", obs, "Transfer cube")
    assert sorted(r[1]) == ["observation.images.top", "observation.state", "task"]
    assert r[1]["observation.images.top"].dtype == np.uint8 and np.array_equal(r[1]["observation.images.top"], cams[1])
    assert r[1]["observation.state"].dtype == np.float32 and np.array_equal(r[1]["observation.state"], joints[1].astype(np.float32))
    assert r[0]["task"] == "transfer_cube"  # gym-aloha's task attribute, what lerobot-eval 0.6.1's env.call("task") gives
    with pytest.raises(ObservationError, match=r"camera_obs\['cam_high_rgb'\].*turn the environment's cameras on"):
        requests("aloha", {"policy": {"joint_pos": joints}})
    with pytest.raises(ObservationError, match=r"policy\['joint_pos'\] has 7 values per env; .* needs 14"):
        requests("aloha", {**obs, "policy": {"joint_pos": joints[:, :7]}})


def test_pusht_sends_gym_pushts_observation_under_lerobots_names():
    pixels, agent = image(2, 96, 96), RNG.uniform(0, 512, (2, 2))
    keypoints = RNG.uniform(0, 512, (2, 16))
    r = requests("pusht", {"camera_obs": {"top_rgb": pixels}, "policy": {"agent_pos": agent, "environment_state": keypoints}})
    assert sorted(r[0]) == ["observation.environment_state", "observation.image", "observation.state", "task"]
    assert np.array_equal(r[1]["observation.image"], pixels[1])
    assert r[1]["observation.state"].dtype == np.float32 and np.array_equal(r[1]["observation.state"], agent[1].astype(np.float32))
    assert np.array_equal(r[1]["observation.environment_state"], keypoints[1].astype(np.float32))
    assert r[0]["task"] == ""
    state = np.concatenate([agent, RNG.uniform(0, 512, (2, 2)), RNG.uniform(0, 6, (2, 1))], axis=1)
    only_state = requests("pusht", {"policy": {"state": state}})  # obs type "state": agent_pos = state[:2]
    assert sorted(only_state[0]) == ["observation.state", "task"]
    assert np.array_equal(only_state[1]["observation.state"], agent[1].astype(np.float32))
    with pytest.raises(ObservationError, match="sends one image .* cameras \\['a_rgb', 'b_rgb'\\]"):
        requests("pusht", {"camera_obs": {"a_rgb": pixels, "b_rgb": pixels}, "policy": {"agent_pos": agent}})


def test_libero_rotates_both_cameras_and_builds_lerobots_8_dim_state():
    agent, wrist = image(2, 32, 32), image(2, 32, 32)
    pos, gripper = RNG.normal(size=(2, 3)), RNG.uniform(0, 0.04, (2, 2))
    quat = RNG.normal(size=(2, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    obs = {"camera_obs": {"agentview_rgb": agent, "eye_in_hand_rgb": wrist},
           "policy": {"eef_pos": pos, "eef_quat": quat, "gripper_qpos": gripper, "joint_pos": np.zeros((2, 7))}}
    r = requests("libero", obs, "put the bowl on the plate")
    assert sorted(r[0]) == ["observation.images.image", "observation.images.image2", "observation.state", "task"]
    assert np.array_equal(r[1]["observation.images.image"], agent[1][::-1, ::-1])
    assert np.array_equal(r[1]["observation.images.image2"], wrist[1][::-1, ::-1])
    assert r[1]["observation.images.image"].flags.c_contiguous
    state = r[1]["observation.state"]
    assert state.dtype == np.float32 and state.shape == (8,)
    assert np.array_equal(state[:3], pos[1].astype(np.float32)) and np.array_equal(state[6:], gripper[1].astype(np.float32))
    assert r[0]["task"] == "put the bowl on the plate"  # LIBERO's task.language, which arena sends as the instruction


def test_libero_axis_angle_is_the_rotation_of_the_quaternion():
    """Cross-checked against openpi's float64 port of robosuite's quat2axisangle and scipy."""
    Rotation = pytest.importorskip("scipy.spatial.transform").Rotation
    quat_to_axis_angle = pytest.importorskip("arena_openpi.adapters").quat_to_axis_angle

    for _ in range(200):
        q = RNG.normal(size=4)
        q /= np.linalg.norm(q)
        ours = libero_state(np.zeros(3), q, np.zeros(2))[3:6].astype(np.float64)
        np.testing.assert_allclose(ours, quat_to_axis_angle(q.astype(np.float32)), rtol=1e-6, atol=1e-6)
        assert Rotation.from_rotvec(ours).approx_equal(Rotation.from_quat(q), atol=1e-5)
    assert np.array_equal(libero_state(np.zeros(3), [0, 0, 0, 1.0], np.zeros(2))[3:6], np.zeros(3, np.float32))


def test_metaworld_sends_agent_pos_lerobots_task_text_and_optionally_the_full_state():
    state, frames = RNG.normal(size=(2, 39)), image(2, 40, 40)
    obs = {"policy": {"state": state}, "camera_obs": {"corner2": frames}, "task": ["push-v3", "push-v3"]}
    r = requests("metaworld", obs, "arena's own wording")
    assert sorted(r[0]) == ["observation.image", "observation.state", "task"]
    assert np.array_equal(r[1]["observation.image"], frames[1])  # arena's upright frame is LeRobot's flipped one
    assert r[1]["observation.state"].dtype == np.float32 and np.array_equal(r[1]["observation.state"], state[1, :4].astype(np.float32))
    assert r[0]["task"] == "Push the puck to a goal" == LEROBOT_METAWORLD_TASKS["push-v3"]
    full = requests("metaworld_environment_state", {"policy": {"state": state}, "task": ["push-v3"] * 2})
    assert sorted(full[0]) == ["observation.environment_state", "observation.state", "task"]
    assert np.array_equal(full[1]["observation.environment_state"], state[1].astype(np.float32))
    assert sorted(requests("metaworld", obs, environment_state=True)[0])[0] == "observation.environment_state"
    assert not LeRobotMetaWorldAdapter().environment_state


def test_the_metaworld_task_table_covers_every_arena_metaworld_task():
    from arena.envs.metaworld import TASK_DESCRIPTIONS

    assert sorted(LEROBOT_METAWORLD_TASKS) == sorted(TASK_DESCRIPTIONS)


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_actions_are_the_identity_both_ways_with_the_base_checks(name):
    adapter = ADAPTERS[name]()
    if hasattr(adapter, "bind"):  # lerobot_env: the width is the bridge environment's
        adapter.bind(SimpleNamespace(action_space=SimpleNamespace(shape=(3,))))
        assert adapter.action_dim == 3
    chunk = RNG.uniform(-1, 1, (5, adapter.action_dim)).astype(np.float32)  # a LeRobot policy's action
    back = adapter.unpack_actions({"action": chunk}, "action")
    assert back.dtype == np.float64 and np.array_equal(back, chunk)
    again = adapter.unpack_actions(adapter.pack_actions(back, "action"), "action")
    assert again.tobytes() == back.tobytes()
    with pytest.raises(ProtocolViolation, match=rf"expected \(H, {adapter.action_dim}\)"):
        adapter.unpack_actions({"action": np.zeros((5, adapter.action_dim + 1), np.float32)}, "action")
    with pytest.raises(ProtocolViolation, match="NaN"):
        adapter.unpack_actions({"action": np.full((1, adapter.action_dim), np.nan, np.float32)}, "action")


def test_the_lerobot_env_adapter_sends_the_bridge_observation_under_its_own_names():
    adapter = ADAPTERS["lerobot_env"]()
    observation = {
        "camera_obs": {"observation.image": RNG.integers(0, 256, (2, 8, 6, 3), dtype=np.uint8)},
        "policy": {"observation.state": RNG.normal(size=(2, 2)).astype(np.float32),
                   "observation.environment_state": RNG.normal(size=(2, 16))},
        "task": ["push it", "push that"],
    }
    request = adapter.pack_request(adapter.extract(observation, 1), "ignored")
    assert sorted(request) == ["observation.environment_state", "observation.image", "observation.state", "task"]
    assert np.array_equal(request["observation.image"], observation["camera_obs"]["observation.image"][1])
    assert request["observation.state"].dtype == np.float32 and request["observation.environment_state"].dtype == np.float32
    assert request["task"] == "push that"  # the env's task string, as lerobot-eval sends it
    observation["policy"]["observation.state"][0, 0] = np.nan
    with pytest.raises(ObservationError, match="NaN"):
        adapter.extract(observation, 0)
