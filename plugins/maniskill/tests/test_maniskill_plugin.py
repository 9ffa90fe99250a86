"""The plugin in arena's own interpreter, which has no ManiSkill: config, catalog, worker plan,
examples, the doctor's Vulkan check, the PushCube controller."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from arena.config import load_experiment
from arena.envs.workers.layout import plan_workers
from arena.launch.submit import run_experiment
from arena.testing.plugin_tests import run_arena as arena
from arena_maniskill.catalog import OFFLINE_TASKS, TASKS, check_task_id
from arena_maniskill.config import ManiSkillConfig
from arena_maniskill.doctor import vulkan_check
from arena_maniskill.env import ManiSkillEnvironment
from arena_maniskill.pushcube import PushCubeModel, push_cube_action

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def write(tmp_path: Path, experiment: dict) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def test_catalog_lists_the_offline_eight_and_accepts_any_gym_id():
    assert OFFLINE_TASKS == ("PickCube-v1", "PushCube-v1", "StackCube-v1", "PegInsertionSide-v1", "PullCube-v1",
                             "LiftPegUpright-v1", "PushT-v1", "PlugCharger-v1")
    assert TASKS["PickCube-v1"].metrics == {"is_grasped": "max", "is_obj_placed": "max"}
    assert not TASKS["PutCarrotOnPlateInScene-v1"].offline
    assert check_task_id("OpenCabinetDrawer-v1") == "OpenCabinetDrawer-v1"  # not listed, still a gym id
    with pytest.raises(ValueError, match="did you mean PickCube-v1"):
        check_task_id("PickCube")


def test_config_defaults_and_what_the_task_brings():
    config = ManiSkillConfig(task="PlugCharger-v1")
    assert (config.obs_mode, config.control_mode, config.sim_backend) == ("rgb", "pd_joint_pos", "cpu")
    assert (config.image_height, config.image_width) == (128, 128)
    assert config.max_episode_steps() == 200 and config.task_instruction().startswith("insert the charger")
    assert ManiSkillEnvironment.episode_metrics_for(config) == {"obj_to_goal_dist": "min", "obj_to_goal_angle": "min"}
    assert ManiSkillEnvironment.episode_metrics_for(ManiSkillConfig(task="OpenCabinetDrawer-v1")) == {}
    # boolean extras are bounded by 0 and 1 (their intervals stay inside); distances are not
    assert ManiSkillEnvironment.episode_metric_bounds_for(config) == {}
    assert ManiSkillEnvironment.episode_metric_bounds_for(ManiSkillConfig(task="PickCube-v1")) == {
        "is_grasped": (0.0, 1.0), "is_obj_placed": (0.0, 1.0)}
    assert config.maniskill_obs_mode() == "rgb"
    assert ManiSkillConfig(task="PickCube-v1", obs_mode="state").maniskill_obs_mode(cameras=True) == "state_dict+rgb"
    with pytest.raises(ValueError, match="unknown privileged observation 'plan'"):
        ManiSkillConfig(task="PickCube-v1", privileged=["plan"])


def test_cpu_backend_runs_one_env_per_worker_and_physx_cuda_all_in_one():
    cpu = ManiSkillConfig(task="PickCube-v1")
    gpu = ManiSkillConfig(task="PickCube-v1", sim_backend="physx_cuda")
    assert ManiSkillEnvironment.envs_per_worker_for(cpu) == "one"
    assert ManiSkillEnvironment.envs_per_worker_for(gpu) == "all"
    assert [len(s) for s in plan_workers(ManiSkillEnvironment, cpu, 3).slices] == [1, 1, 1]
    assert [len(s) for s in plan_workers(ManiSkillEnvironment, gpu, 256).slices] == [256]
    with pytest.raises(ValueError):
        plan_workers(ManiSkillEnvironment, gpu.model_copy(update={"workers": 2}), 256)


def test_bad_key_in_an_experiment_names_the_file_run_and_key(tmp_path):
    path = write(tmp_path, {"runs": {"cube": {"environment": {"type": "maniskill", "task": "PickCube-v1", "obs_mode": "depth"},
                                              "policy": {"type": "zero_action"}}}})
    result = arena("validate", str(path))
    assert result.returncode == 2
    assert "exp.yaml" in result.stderr and "'cube'" in result.stderr and "obs_mode" in result.stderr


@pytest.mark.parametrize("name", ["maniskill_quick.yaml", "maniskill_gpu.yaml"])
def test_examples_validate_and_dry_run_anywhere(name, tmp_path, capsys):
    experiment = load_experiment(EXAMPLES / name)
    assert run_experiment(experiment, output_dir=tmp_path / "out", dry_run=True) == 0
    text = capsys.readouterr().out
    assert all(run in text for run in experiment.runs)
    if name == "maniskill_gpu.yaml":
        assert {run.environment.sim_backend for run in experiment.runs.values()} == {"physx_cuda"}
        assert min(run.environment_builder.num_envs for run in experiment.runs.values()) >= 256
    else:
        assert {run.environment.task for run in experiment.runs.values()} == {"PullCube-v1", "PushCube-v1"}
        assert {run.policy_cls.name for run in experiment.runs.values()} == {"maniskill_motion_planner", "zero_action"}


def test_gpu_example_dry_runs_for_slurm(tmp_path):
    result = arena("run", str(EXAMPLES / "maniskill_gpu.yaml"), "--backend", "slurm", "--dry-run", "--output-dir", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "sbatch" in result.stdout and "pick_cube_zero" in result.stdout


def test_asset_task_validates_and_dry_runs_without_its_assets(tmp_path):
    path = write(tmp_path, {"runs": {"carrot": {
        "environment": {"type": "maniskill", "task": "PutCarrotOnPlateInScene-v1", "asset_dir": str(tmp_path / "none")},
        "policy": {"type": "zero_action"}}}})
    assert arena("validate", str(path)).returncode == 0
    result = arena("run", str(path), "--dry-run", "--output-dir", str(tmp_path / "out"))
    assert result.returncode == 0 and "PutCarrotOnPlateInScene-v1" in result.stdout


def test_push_cube_remote_refuses_another_task_or_controller(tmp_path):
    for env, words in (({"task": "PickCube-v1", "obs_mode": "state", "control_mode": "pd_ee_delta_pos"}, "PushCube-v1 only"),
                       ({"task": "PushCube-v1", "obs_mode": "rgb", "control_mode": "pd_ee_delta_pos"}, "obs_mode state"),
                       ({"task": "PushCube-v1", "obs_mode": "state"}, "control_mode: pd_ee_delta_pos")):
        path = write(tmp_path, {"runs": {"r": {"environment": {"type": "maniskill", **env}, "policy": {"type": "maniskill_push_cube_remote"}}}})
        result = arena("validate", str(path))
        assert result.returncode == 2 and words in result.stderr, result.stderr


def test_push_cube_controller_goes_behind_the_cube_then_pushes_towards_the_goal():
    cube, goal = np.array([0.0, 0.05, 0.02]), np.array([0.12, 0.05, 0.0])
    start = push_cube_action(np.array([0.02, 0.0, 0.1]), cube, goal)  # in front: goes behind, over it
    assert start[0] < 0 and start[3] == -1.0
    behind = push_cube_action(np.array([-0.055, 0.05, 0.02]), cube, goal)  # behind, aligned: pushes +x
    assert behind[0] == pytest.approx(0.6) and abs(behind[1]) < 1e-6  # 3 cm a step at most, gain 20
    reply = PushCubeModel().infer({"observation/tcp_pos": [-0.055, 0.05, 0.02], "observation/cube_pos": cube, "observation/goal_pos": goal})
    assert reply["actions"].shape == (1, 4) and reply["actions"].dtype == np.float32
    with pytest.raises(ValueError, match="observation/goal_pos"):
        PushCubeModel().infer({"observation/tcp_pos": [0, 0, 0], "observation/cube_pos": [0, 0, 0]})


def _fake_python(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_vulkan_check_fails_with_the_backports_fix_when_sapien_finds_no_device(tmp_path):
    """What bookworm's own Mesa 22.3 gives: SAPIEN lists llvmpipe but cannot create a renderer."""
    python = _fake_python(tmp_path, "echo 'GPU: llvmpipe (LLVM 15.0.6, 256 bits) | Supported: 0'\n"
                                     "echo 'RuntimeError: Failed to find a supported physical device \"cpu\"' >&2; exit 1")
    check = vulkan_check(python)
    assert check.status == "fail" and "llvmpipe" in check.detail and "supported physical device" in check.detail
    assert "bookworm-backports" in check.fix and "mesa-vulkan-drivers" in check.fix
    ok = vulkan_check(_fake_python(tmp_path, "echo 'GPU: llvmpipe (LLVM 19) |   Supported: 1'; echo RENDER-OK"))
    assert ok.status == "ok" and "llvmpipe (LLVM 19)" in ok.detail and ok.fix is None


def test_doctor_runs_the_vulkan_check_in_the_maniskill_venv():
    from arena.testing.venvs import benchmark_python

    benchmark_python("maniskill")
    result = arena("doctor", "--no-render", "--json")
    import json

    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["venv maniskill"]["status"] == "ok", checks["venv maniskill"]
    vulkan = checks["maniskill Vulkan"]
    assert vulkan["status"] == "ok", vulkan
    assert "SAPIEN renders on" in vulkan["detail"]
