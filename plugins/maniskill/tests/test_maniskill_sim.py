"""The ``maniskill`` environment against ManiSkill3 itself, under the ``maniskill`` venv's interpreter.

Each test runs ``sim_checks.py`` with the venv's Python (``arena venv setup maniskill`` creates
it; the suite's own interpreter has no ManiSkill) and asserts on the JSON it prints.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.testing.environments import check_environment_in_venv
from arena.testing.venvs import run_in_venv

CHECKS = Path(__file__).with_name("sim_checks.py")


def sim_check(*args: str) -> dict:
    return run_in_venv("maniskill", str(CHECKS), *args)


@pytest.mark.slow
def test_the_environment_contract_holds_in_the_maniskill_venv():
    # arena.testing's conformance check, seeding across processes included (one env per worker)
    # (the camera layout is test_observation_matches_maniskill...'s): state only, one env, whose
    # observation has no camera while videos still get ManiSkill's render camera
    config = {"task": "PushCube-v1", "obs_mode": "state"}
    report = check_environment_in_venv(
        "maniskill", "arena_maniskill.env:ManiSkillEnvironment", config, num_envs=1, seeds=[5], steps=2, render=True
    )
    assert report["success_key"] == "success" and report["action_dim"] == 8
    assert {key.split("/")[0] for key in report["observation"]} == {"policy", "task"}
    assert report["render"][:2] == [[128, 128, 3], "uint8"] and report["render"][2] > 10


@pytest.mark.slow
def test_observation_matches_maniskill_and_a_seed_is_the_same_scene_on_any_env():
    """PickCube-v1, rgb+state, 2 envs: arena's layout holds exactly ManiSkill's own state vector
    and camera frame for the same seed, also after stepping both with the same actions."""
    result = sim_check("layout")
    assert result["keys"] == ["camera_obs", "policy", "task"]
    assert result["camera"] == {"base_camera_rgb": [[2, 128, 128, 3], "uint8"]}
    assert result["frame_std"] > 10  # a rendered scene, not a blank frame
    policy = result["policy"]
    assert policy["qpos"] == [[2, 9], "float32"] and policy["tcp_pose"] == [[2, 7], "float32"]
    assert policy["obj_pose"] == [[2, 7], "float32"] and policy["state"] == [[2, 42], "float32"]
    assert result["task"] == ["pick up the red cube and move it to the green goal position"] * 2
    assert result["action_space"] == [[8], "float32"] and result["max_steps"] == 50
    assert result["state_max_abs_diff"] == 0.0 and result["frame_equal"]
    assert result["stepped_max_abs_diff"] == 0.0
    assert result["info"]["success"] == [[2], "bool"] and result["info"]["is_grasped"] == [[2], "bool"]
    assert result["step_types"] == ["float32", "bool", "bool"]
    assert result["render"] == [[128, 128, 3], "uint8"]
    assert result["reset_same_scene"]
    protocol = result["episode_info"]["protocol"]
    assert protocol["suite"] == "PickCube-v1" and protocol["suite_version"] == "3.0.1"
    assert protocol["control_mode"] == "pd_joint_pos" and protocol["robot"] == "panda"
    assert protocol["simulators"]["numpy"].startswith("1.") and protocol["step_limit"] == 50


def test_an_episode_does_not_depend_on_what_its_env_ran_before():
    """Each episode starts from a rebuilt scene on the CPU backend (``fresh_scene``): seed 5 after
    another episode is seed 5 as a first episode, bit for bit. ManiSkill's plain reset carries
    PhysX state over (the reason for the default); that it drifts is recorded, not required."""
    result = sim_check("history")
    assert result["fresh_max_abs_diff"] == 0.0, result


@pytest.mark.slow
def test_catalog_agrees_with_maniskills_registry_and_info():
    """Step limits and asset ids as ManiSkill registers them; each offline task steps with the
    wheel's assets alone, and its info holds the metrics the catalog declares."""
    from arena_maniskill.catalog import OFFLINE_TASKS, TASKS

    result = sim_check("catalog")
    for gym_id, (ours, theirs) in result["steps"].items():
        assert ours == theirs, gym_id
    for gym_id, known in result["asset_ids"].items():
        # ReplicaCAD's scene builder fetches its dataset itself: the registry lists no id for it.
        assert all(v is True for v in known) or known[-1] == "ReplicaCAD_SceneManipulation-v1", (gym_id, known)
    assert sorted(result["info_keys"]) == sorted(OFFLINE_TASKS) and len(OFFLINE_TASKS) == 8
    for gym_id, (info_keys, metrics) in result["info_keys"].items():
        assert "success" in info_keys and set(metrics) <= set(info_keys), gym_id
        assert metrics == sorted(TASKS[gym_id].metrics)


@pytest.mark.slow
def test_a_task_whose_assets_are_absent_names_the_download_command(tmp_path):
    result = sim_check("assets", str(tmp_path / "assets"))
    assert result["asset_dir"] == str(tmp_path / "assets" / "data")
    error = result["error"]
    assert "PutCarrotOnPlateInScene-v1 needs the assets bridge_v2_real2sim" in error
    assert f"MS_ASSET_DIR={tmp_path / 'assets'} python -m mani_skill.utils.download_asset bridge_v2_real2sim" in error


@pytest.mark.slow
def test_physx_cuda_path_hands_one_batched_env_every_seed_and_the_reset_indices():
    """The GPU backend's bookkeeping, on a CPU (untested on a GPU): one ManiSkill env of 4
    scenes; a partial reset passes all four current seeds with env_idx; steps, observations,
    info and renders split back per env in env order; per-env info only."""
    result = sim_check("batched")
    assert result["made"] == [{"num_envs": 4, "sim_backend": "physx_cuda"}]
    assert result["calls"] == [{"seed": [0, 0, 0, 0], "env_idx": [0, 1, 2, 3]},
                               {"seed": [0, 11, 0, 13], "env_idx": [1, 3]}, "closed"]
    assert result["qpos"] == [0.0, 11.0, 0.0, 13.0]
    assert result["camera"] == [[4, 4, 4, 3], [0, 11, 0, 13]]
    assert result["reward"] == [1.5, 1.5, 3.25, 3.75]
    assert result["terminated"] == result["success"] == [True, False, True, False]
    assert result["truncated"] == [False] * 4 and result["info"] == ["elapsed_steps", "success"]
    assert (result["seed_of_3"], result["elapsed_of_2"], result["render"]) == (13, 1, [13, 13, 13])
    assert result["same_env"]
