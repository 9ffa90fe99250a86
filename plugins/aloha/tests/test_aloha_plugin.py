"""The plugin in arena's own interpreter, which has no gym-aloha: config, CLI, examples, expert guards."""

from __future__ import annotations

import functools
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from arena.errors import ConfigError
from arena.testing.plugin_tests import OSMESA, listed_plugin, refused_by_validate, run_arena
from arena_aloha import kinematics as kin
from arena_aloha.config import AlohaConfig
from arena_aloha.expert import AlohaTransferCubeExpert, AlohaTransferCubeExpertConfig

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


arena = functools.partial(run_arena, env=OSMESA)


def test_task_accepts_gym_aloha_ids_and_names_the_closest_task():
    assert AlohaConfig(task="gym_aloha/AlohaTransferCube-v0").task == "transfer_cube"
    assert AlohaConfig(task="AlohaInsertion-v0").task == "insertion"
    assert AlohaConfig(task="transfer_cube").task_instruction() == "Transfer cube"
    with pytest.raises(ValueError, match="did you mean transfer_cube"):
        AlohaConfig(task="transfer-cub")


def test_cameras_default_to_the_benchmark_top_camera_and_unknown_ones_are_refused():
    assert AlohaConfig(task="insertion").cameras == ["cam_high"]
    assert AlohaConfig(task="insertion", cameras=["cam_left_wrist", "left_pillar"]).cameras == ["cam_left_wrist", "left_pillar"]
    with pytest.raises(ValueError, match="did you mean cam_low"):
        AlohaConfig(task="insertion", cameras=["cam_lo"])
    with pytest.raises(ValueError, match="twice"):
        AlohaConfig(task="insertion", cameras=["cam_high", "cam_high"])


def test_bad_camera_in_an_experiment_names_the_file_run_and_key(tmp_path):
    experiment = {
        "runs": {"cube": {"environment": {"type": "aloha", "task": "transfer_cube", "cameras": ["wrist"]}, "policy": {"type": "zero_action"}}}
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    result = arena("validate", str(path))
    assert result.returncode == 2
    assert "exp.yaml" in result.stderr and "'cube'" in result.stderr and "cameras" in result.stderr
    assert "unknown ALOHA camera 'wrist'" in result.stderr


def test_more_workers_than_one_but_fewer_than_envs_is_refused_one_env_per_worker(tmp_path):
    experiment = {
        "shared": {"environment_builder": {"num_envs": 4}},
        "runs": {"cube": {"environment": {"type": "aloha", "task": "transfer_cube", "workers": 2}, "policy": {"type": "zero_action"}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment))
    result = arena("validate", str(path))
    assert result.returncode == 2
    assert "one env per worker process" in result.stderr and "environment.workers" in result.stderr


def test_the_transfer_cube_expert_on_another_task_is_refused_by_validate(tmp_path):
    """It used to pass `arena validate` and fail at its first step, after the run started."""
    experiment = {
        "runs": {"peg": {"environment": {"type": "aloha", "task": "insertion"}, "policy": {"type": "aloha_transfer_cube_expert"}}}
    }
    flat = refused_by_validate(tmp_path, experiment)
    assert "exp.yaml" in flat and "'peg'" in flat and "key policy" in flat
    assert "solves transfer_cube only, not environment.task 'insertion'" in flat


@pytest.mark.slow
def test_examples_validate_and_dry_run_everywhere_without_gym_aloha(tmp_path):
    """Validation and planning (local, Slurm, OSMO) never need the simulator."""
    assert importlib.util.find_spec("gym_aloha") is None  # this interpreter has another MuJoCo
    for example in ("aloha_quick.yaml", "aloha_pi0.yaml"):
        validated = arena("validate", str(EXAMPLES / example))
        assert validated.returncode == 0, validated.stdout + validated.stderr
    pi0 = EXAMPLES / "aloha_pi0.yaml"
    local = arena("run", str(pi0), "--dry-run", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert "aloha transfer_cube with pi0_remote" in local.stdout and "pi0_aloha_sim" in local.stdout
    slurm = arena("run", str(pi0), "--dry-run", "--backend", "slurm", cwd=tmp_path)
    assert slurm.returncode == 0, slurm.stderr
    script = next(word for word in slurm.stdout.split() if word.endswith("transfer_cube_pi0.sbatch"))
    # the server's command is in the job's node spec, which the script's one `arena node` line reads
    assert "--policy.config=pi0_aloha_sim" in Path(script).with_suffix(".node.json").read_text()
    data = yaml.safe_load(pi0.read_text())
    h100 = {"gpu_type": "H100", "gpus": 8, "gpu_memory_gb": 80, "memory_gb": 2048, "cpus": 224}
    data["launch"] = {"backend": "osmo", "osmo": {"pool": "gpu-pool", "platforms": {"gpu-pool": {"dgx-h100": h100}}}}
    (tmp_path / "aloha_pi0_osmo.yaml").write_text(yaml.safe_dump(data))
    osmo = arena("run", str(tmp_path / "aloha_pi0_osmo.yaml"), "--dry-run", cwd=tmp_path)
    assert osmo.returncode == 0, osmo.stderr
    workflows = sorted({w for w in osmo.stdout.split() if "arena-dry-run-" in w and w.endswith(".yaml") and Path(w).is_file()})
    assert workflows and "pi0_aloha_sim" in Path(workflows[0]).read_text()  # the dry-run writes the workflow files
    shutil.rmtree(Path(workflows[0]).parent)
    assert not (tmp_path / "outputs").exists()


def test_plugin_registers_the_environment_the_expert_and_its_command():
    plugin = listed_plugin("aloha")
    assert plugin["distribution"] == "arena-plugin-aloha"
    assert plugin["registered"]["environments"] == ["aloha"]
    assert plugin["registered"]["policies"] == ["aloha_transfer_cube_expert"]
    help_text = arena("aloha", "setup", "--help")
    text = " ".join(help_text.stdout.split())
    assert help_text.returncode == 0 and "gym-aloha 0.1.5" in text and "arena venv setup aloha" in text


def test_inverse_kinematics_returns_to_poses_forward_kinematics_gives():
    rng = np.random.default_rng(1)
    start = np.array([0.0, -0.96, 1.16, 0.0, -0.3, 0.0])
    for arm in (kin.LEFT, kin.RIGHT):
        for _ in range(5):
            goal = start + rng.uniform(-0.3, 0.3, 6)
            pos, rot, _, _ = kin.forward(arm, goal)
            found = kin.inverse(arm, pos, rot, start)
            got_pos, got_rot, _, _ = kin.forward(arm, found)
            assert np.abs(got_pos - pos).max() < 1e-4 and np.abs(got_rot - rot).max() < 1e-3
            assert np.all(found >= kin.JOINT_LOW) and np.all(found <= kin.JOINT_HIGH)


def test_expert_refuses_other_tasks_and_observations_without_the_object_pose():
    expert = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())
    joints = np.zeros((1, 14))
    with pytest.raises(ConfigError, match="transfer_cube only"):
        expert.get_action(None, {"policy": {"joint_pos": joints, "object_pose": np.zeros((1, 14))}, "task": ["insertion"]})
    with pytest.raises(ConfigError, match="object_pose"):
        expert.get_action(None, {"policy": {"joint_pos": joints}, "task": ["transfer_cube"]})


def test_expert_actions_are_a_function_of_the_episode_alone():
    """Two envs given the same episode get the same actions, whichever env and whatever ran before."""
    start = np.array([0, -0.96, 1.16, 0, -0.3, 0, 0.1] * 2, np.float64)
    cube = np.array([0.1, 0.5, 0.05, 1, 0, 0, 0], np.float64)
    obs = {"policy": {"joint_pos": np.stack([start, start]), "object_pose": np.stack([cube, cube])}, "task": ["transfer_cube"] * 2}
    expert = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())
    expert.reset([0, 1], [3, 3])
    for _ in range(7):  # env 1 has run a while ...
        expert.get_action(None, obs)
    expert.reset([1], [3])  # ... then starts the same episode over
    first = expert.get_action(None, obs)
    fresh = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())
    fresh.reset([0], [3])
    assert np.array_equal(first[1], fresh.get_action(None, {**obs, "task": ["transfer_cube"] * 2})[0])
    assert first.dtype == np.float32 and first.shape == (2, 14)
    assert first[1, 6] == 1.0 and first[1, 13] == 1.0  # both grippers open at the start


def test_building_the_env_without_gym_aloha_says_how_to_get_it():
    from arena_aloha.env import AlohaEnvironment

    assert importlib.util.find_spec("gym_aloha") is None
    with pytest.raises(ImportError, match="arena aloha setup"):
        AlohaEnvironment(AlohaConfig(task="transfer_cube"), num_envs=1)
