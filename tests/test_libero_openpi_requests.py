"""The openpi ``libero`` adapter sends, for a frame of arena's ``libero`` environment, exactly
what openpi's LIBERO example client (``examples/libero/main.py``) sends for the same frame.

A probe runs in the LIBERO venv. It starts an episode in arena's environment and, beside it,
the example's own procedure on a plain LIBERO env (``OffScreenRenderEnv`` at 256, ``reset``,
``set_init_state(initial_states[k])``, 10 dummy steps), and saves arena's observation, the raw
LIBERO observation of the same frame, and the example env's state. Here, the example's
transformation is written out independently from its source (rotate 180 degrees,
``image_tools.resize_with_pad`` to 224 and ``convert_to_uint8`` from the real openpi-client,
state = eef pos + axis-angle of the eef quat + gripper qpos, prompt = the task's language)
and compared with the adapter's request. Software renders of one state differ slightly
between two sims, so images are compared on one frame; the two sims' states must agree.
"""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest

PROBE = r"""
import sys
import numpy as np
from arena_libero.env import LiberoConfig, LiberoEnvironment, DUMMY_ACTION

suite, task, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = LiberoEnvironment(LiberoConfig(suite=suite, task=task, image_size=256), num_envs=1)
obs = env.reset_envs([0], [seed])
raw = env._obs[0]  # the dict LIBERO returned for this frame

# openpi's example, on its own env.
import os, pathlib
from libero.libero import benchmark, get_libero_path
from libero.libero.envs import OffScreenRenderEnv
task_suite = benchmark.get_benchmark_dict()[suite]()
t = task_suite.get_task(task)
example = OffScreenRenderEnv(bddl_file_name=str(pathlib.Path(get_libero_path("bddl_files")) / t.problem_folder / t.bddl_file),
                             camera_heights=256, camera_widths=256)
example.seed(7)
example.reset()
ex = example.set_init_state(task_suite.get_task_init_states(task)[seed % 50])
for _ in range(10):
    ex, _, _, _ = example.step([0.0] * 6 + [-1.0])

np.savez(
    sys.argv[1],
    agentview=obs["camera_obs"]["agentview_rgb"], wrist=obs["camera_obs"]["eye_in_hand_rgb"],
    eef_pos=obs["policy"]["eef_pos"], eef_quat=obs["policy"]["eef_quat"], gripper_qpos=obs["policy"]["gripper_qpos"],
    joint_pos=obs["policy"]["joint_pos"], task=np.array(obs["task"][0]), description=np.array(env.task_description),
    raw_agentview=raw["agentview_image"], raw_wrist=raw["robot0_eye_in_hand_image"], raw_eef_pos=raw["robot0_eef_pos"],
    raw_eef_quat=raw["robot0_eef_quat"], raw_gripper_qpos=raw["robot0_gripper_qpos"],
    arena_state=env._sims[0].get_sim_state(), example_state=example.get_sim_state(),
    example_agentview=ex["agentview_image"], example_eef_pos=ex["robot0_eef_pos"], language=np.array(t.language),
    init_state=np.array(env.episode_info(0)["init_state"]),
)
"""


def _openpi_quat2axisangle(quat: np.ndarray) -> np.ndarray:
    """The example's ``_quat2axisangle`` (robosuite's), written out from its source."""
    quat = np.array(quat, np.float64)
    quat[3] = min(1.0, max(-1.0, quat[3]))
    den = np.sqrt(1.0 - quat[3] * quat[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (quat[:3] * 2.0 * math.acos(quat[3])) / den


def _openpi_example_request(raw: dict, language: str) -> dict:
    image_tools = pytest.importorskip("openpi_client.image_tools")
    img = np.ascontiguousarray(raw["agentview_image"][::-1, ::-1])
    wrist = np.ascontiguousarray(raw["robot0_eye_in_hand_image"][::-1, ::-1])
    return {
        "observation/image": image_tools.convert_to_uint8(image_tools.resize_with_pad(img, 224, 224)),
        "observation/wrist_image": image_tools.convert_to_uint8(image_tools.resize_with_pad(wrist, 224, 224)),
        "observation/state": np.concatenate(
            (raw["robot0_eef_pos"], _openpi_quat2axisangle(raw["robot0_eef_quat"]), raw["robot0_gripper_qpos"])
        ),
        "prompt": str(language),
    }


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict:
    from arena.testing.venvs import benchmark_python

    out = tmp_path_factory.mktemp("libero") / "frame.npz"
    done = subprocess.run(
        [str(benchmark_python("libero", "arena libero setup")), "-c", PROBE, str(out), "libero_spatial", "0", "3"],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_adapter_request_equals_openpi_example_request_for_the_same_frame(probe):
    from arena.plugins import get_registry

    adapter = get_registry().adapter("openpi", "libero")()
    observation = {
        "camera_obs": {"agentview_rgb": probe["agentview"], "eye_in_hand_rgb": probe["wrist"]},
        "policy": {k: probe[k] for k in ("eef_pos", "eef_quat", "gripper_qpos", "joint_pos")},
    }
    ours = adapter.pack_request(adapter.extract(observation, 0), str(probe["description"]))
    raw = {
        "agentview_image": probe["raw_agentview"], "robot0_eye_in_hand_image": probe["raw_wrist"],
        "robot0_eef_pos": probe["raw_eef_pos"], "robot0_eef_quat": probe["raw_eef_quat"],
        "robot0_gripper_qpos": probe["raw_gripper_qpos"],
    }
    theirs = _openpi_example_request(raw, str(probe["language"]))
    assert sorted(ours) == sorted(theirs)
    for key in ("observation/image", "observation/wrist_image"):
        assert ours[key].dtype == theirs[key].dtype == np.uint8 and ours[key].shape == (224, 224, 3)
        assert np.array_equal(ours[key], theirs[key]), key
    assert ours["observation/state"].shape == (8,)
    np.testing.assert_allclose(ours["observation/state"], theirs["observation/state"], rtol=0, atol=1e-12)
    assert ours["prompt"] == theirs["prompt"] == "pick up the black bowl between the plate and the ramekin and place it on the plate"
    assert str(probe["task"]) == ours["prompt"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_episode_starts_where_openpis_example_starts(probe):
    """Init state ``seed mod 50`` and 10 dummy steps: the same simulation state as the example."""
    assert int(probe["init_state"]) == 3
    np.testing.assert_allclose(probe["arena_state"], probe["example_state"], atol=1e-9)
    np.testing.assert_allclose(probe["eef_pos"][0], probe["example_eef_pos"], atol=1e-9)
    # Renders of one state by two sims differ only slightly (OSMesa), and both come upside down.
    ours, theirs = probe["agentview"][0].astype(int), probe["example_agentview"].astype(int)
    same_way = np.abs(ours - theirs).mean()
    flipped = np.abs(ours[::-1, ::-1] - theirs).mean()
    assert same_way < 5.0 and flipped > 3 * same_way, (same_way, flipped)
