"""PushT in arena's own interpreter, which needs no gym-pusht: registration, config errors, the
example's validation and dry-run, the venv declaration, the expert's geometry and guards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from arena.testing.plugin_tests import listed_plugin, refused_by_validate
from arena.testing.plugin_tests import run_arena as arena
from arena_lerobot.pusht.config import PushTConfig
from arena_lerobot.pusht.expert import (
    DISC_RADIUS,
    PushTExpert,
    PushTExpertConfig,
    _clear_segments,
    _first_waypoint,
    distance_to_block,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_plugin_registers_the_environment_and_the_expert_and_the_venv_is_declared():
    plugin = listed_plugin("lerobot")
    assert plugin["distribution"] == "arena-plugin-lerobot"
    assert "pusht" in plugin["registered"]["environments"]
    assert "pusht_expert" in plugin["registered"]["policies"]
    from arena.venvs import declared_venvs

    spec = declared_venvs()["pusht"][0]
    assert spec.distributions == ("arena-plugin-lerobot[sim]",)  # gym-pusht==0.1.8: the plugin's `sim` extra


def test_config_defaults_are_gym_pushts_and_unknown_obs_types_are_refused(tmp_path):
    config = PushTConfig()
    assert (config.obs_type, config.observation_width, config.observation_height) == ("pixels_agent_pos", 96, 96)
    assert config.task_name() == "PushT-v0" and config.has_pixels and not PushTConfig(obs_type="state").has_pixels
    experiment = {"runs": {"push": {"environment": {"type": "pusht", "obs_type": "keypoints"}, "policy": {"type": "zero_action"}}}}
    flat = refused_by_validate(tmp_path, experiment)
    assert "exp.yaml" in flat and "'push'" in flat and "obs_type" in flat and "pixels_agent_pos" in flat


def test_the_expert_on_another_environment_is_refused_by_validate(tmp_path):
    experiment = {"runs": {"kitchen": {"environment": {"type": "franka_kitchen", "task": "microwave"}, "policy": {"type": "pusht_expert"}}}}
    flat = refused_by_validate(tmp_path, experiment)
    assert "exp.yaml" in flat and "'kitchen'" in flat and "pusht_expert drives the 'pusht' environment only" in flat


@pytest.mark.slow
def test_the_example_validates_and_dry_runs_without_the_simulator(tmp_path):
    validated = arena("validate", str(EXAMPLES / "pusht.yaml"))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "2 run(s): pusht_expert, pusht_zero" in validated.stdout
    planned = arena("run", str(EXAMPLES / "pusht.yaml"), "--dry-run", cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "pusht" in planned.stdout and "pusht_expert" in planned.stdout and "zero_action" in planned.stdout
    assert not (tmp_path / "outputs").exists()


def test_distance_to_block_is_zero_inside_the_t_and_grows_outside():
    pose = np.array([256.0, 256.0, 0.0])  # bar: x 196..316, y 256..286; stem: x 241..271, y 286..376
    points = np.array([[256.0, 270.0], [256.0, 350.0], [256.0, 246.0], [200.0, 300.0], [330.0, 271.0]])
    assert distance_to_block(points, pose) == pytest.approx([0.0, 0.0, 10.0, 14.0, 14.0])
    turned = np.array([256.0, 256.0, np.pi / 2])  # a quarter turn about the origin: the stem points to -x
    assert distance_to_block(np.array([[256.0 - 350.0 + 256.0, 256.0]]), turned) == pytest.approx([0.0])


def test_the_route_round_the_block_keeps_clear_of_it():
    pose = np.array([256.0, 256.0, 0.0])
    start, goal = np.array([256.0, 200.0]), np.array([256.0, 420.0])  # above the bar, below the stem
    centre = np.array([256.0, 301.0])
    clearance = DISC_RADIUS + 2.0
    assert not _clear_segments(np.stack([start, goal]), pose, clearance)[0, 1]  # straight through: blocked
    waypoint = _first_waypoint(start, goal, pose, centre, clearance)
    assert waypoint is not None and not np.allclose(waypoint, goal)
    assert _clear_segments(np.stack([start, waypoint]), pose, clearance)[0, 1]


class _Env:
    num_envs = 3


def test_the_expert_pushes_active_envs_towards_the_block_and_leaves_idle_ones_alone():
    expert = PushTExpert(PushTExpertConfig())
    env = _Env()
    expert.start(env)
    expert.reset()
    expert.set_active([0, 2])
    goal = np.tile([256.0, 256.0, np.pi / 4], (3, 1))
    block = np.array([[200.0, 200.0, 0.0], [300.0, 300.0, 1.0], [256.0, 256.0, np.pi / 4 + 0.3]])
    agent = np.array([[60.0, 60.0], [400.0, 400.0], [256.0, 150.0]])
    obs = {"privileged": {"agent_pos": agent, "block_pose": block, "goal_pose": goal}}
    actions = expert.get_action(env, obs)
    assert actions.shape == (3, 2) and actions.dtype == np.float64
    assert np.all(actions[1] == 0.0)  # idle: nothing computed
    assert np.all((actions[[0, 2]] > 0.0) & (actions[[0, 2]] < 512.0))
    # Targets stay out of the block unless the disc is pushing it.
    assert np.all(distance_to_block(actions[[0, 2]], block[0]) >= 0.0)
    again = PushTExpert(PushTExpertConfig())
    again.start(env)
    again.set_active([0, 2])
    assert np.array_equal(again.get_action(env, obs), actions)  # deterministic
