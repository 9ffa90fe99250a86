"""Meta-World environment: layout, per-episode determinism, task names, experts, cameras."""

from __future__ import annotations

import time

import numpy as np
import pytest
from pydantic import ValidationError

# Importing arena.envs.metaworld first selects headless OSMesa rendering before MuJoCo loads.
from arena.envs.metaworld import (
    TASK_DESCRIPTIONS,
    MetaWorldConfig,
    MetaWorldEnvironment,
)


def _expert(task: str):
    from metaworld.policies import ENV_POLICY_MAP

    return ENV_POLICY_MAP[task]()


def _episode(env: MetaWorldEnvironment, env_id: int, seed: int, steps: int = 20, expert=None):
    """States of env ``env_id`` over one episode; the other envs get zero actions."""
    obs = env.reset_envs([env_id], [seed])
    states = [obs["policy"]["state"][env_id].copy()]
    for _ in range(steps):
        actions = np.zeros((env.num_envs, 4), np.float32)
        if expert is not None:
            actions[env_id] = expert.get_action(obs["policy"]["state"][env_id])
        obs, *_ = env.step(actions)
        states.append(obs["policy"]["state"][env_id].copy())
    return np.stack(states)


@pytest.fixture(scope="module")
def reach2():
    env = MetaWorldEnvironment(MetaWorldConfig(task="reach-v3"), num_envs=2)
    yield env
    env.close()


def test_observation_layout_dtypes_and_shapes(reach2):
    obs = reach2.reset_envs([0, 1], [0, 1])
    assert set(obs) == {"policy", "task"}  # no camera_obs unless cameras are on
    state = obs["policy"]["state"]
    assert state.dtype == np.float64 and state.shape == (2, 39)
    assert obs["task"] == ["reach-v3", "reach-v3"]
    assert reach2.action_space.shape == (4,) and reach2.action_space.dtype == np.float32
    assert reach2.default_max_episode_steps == 500
    assert reach2.task_description == "Reach the red goal position with the gripper."

    obs, reward, terminated, truncated, info = reach2.step(np.zeros((2, 4), np.float32))
    assert obs["policy"]["state"].shape == (2, 39)
    assert reward.dtype == np.float64 and reward.shape == (2,)
    assert terminated.dtype == bool and not terminated.any()
    assert truncated.dtype == bool and not truncated.any()
    assert info["success"].dtype == bool and info["success"].shape == (2,)


def test_wrong_action_shape_is_refused(reach2):
    with pytest.raises(ValueError, match=r"\(2, 4\)"):
        reach2.step(np.zeros((1, 4), np.float32))


def test_same_seed_same_trajectory_on_any_env_of_any_batch():
    config = MetaWorldConfig(task="pick-place-v3")
    expert = _expert("pick-place-v3")
    single = MetaWorldEnvironment(config, num_envs=1)
    batch = MetaWorldEnvironment(config, num_envs=4)
    try:
        reference = _episode(single, 0, seed=7, expert=expert)
        # Env 3 of a 4-env batch, after other episodes ran on it and next to it.
        _episode(batch, 3, seed=11, expert=expert)
        _episode(batch, 1, seed=5, expert=expert)
        again = _episode(batch, 3, seed=7, expert=expert)
        np.testing.assert_array_equal(reference, again)
        # Zero actions too, and after the single env ran another episode.
        _episode(single, 0, seed=3)
        np.testing.assert_array_equal(_episode(single, 0, seed=7), _episode(batch, 2, seed=7))
    finally:
        single.close()
        batch.close()


def test_different_seeds_choose_different_goals(reach2):
    goals = {tuple(reach2.reset_envs([0], [seed])["policy"]["state"][0, -3:]) for seed in range(6)}
    assert len(goals) > 1


def test_unknown_task_error_names_close_matches():
    with pytest.raises(ValidationError, match="reach-v3"):
        MetaWorldConfig(task="reach-v2")
    with pytest.raises(ValidationError, match="pick-place-v3"):
        MetaWorldConfig(task="pickplace")


def test_every_metaworld_task_has_a_description():
    import metaworld

    assert set(TASK_DESCRIPTIONS) == set(metaworld.env_dict.ALL_V3_ENVIRONMENTS)
    assert all(text.endswith(".") and text[0].isupper() for text in TASK_DESCRIPTIONS.values())


@pytest.mark.filterwarnings("ignore:Constant")
def test_metaworld_expert_solves_reach_quickly(reach2):
    expert = _expert("reach-v3")
    obs = reach2.reset_envs([0, 1], [21, 22])
    solved = np.zeros(2, bool)
    for _ in range(150):
        actions = np.stack([expert.get_action(s) for s in obs["policy"]["state"]])
        obs, _, _, _, info = reach2.step(actions.astype(np.float32))
        solved |= info["success"]
        if solved.all():
            break
    assert solved.all()


def test_stepping_past_metaworld_horizon_does_not_raise(reach2):
    reach2.reset_envs([0], [0])  # env 1 keeps running from earlier tests
    for _ in range(505):
        reach2.step(np.zeros((2, 4), np.float32))


def test_the_environment_contract_holds_seeding_across_processes_included():
    # arena.testing's conformance check: layout, step types, success key, records, the same
    # first observation in a worker process, close twice (it replaces a close-twice test)
    from arena.testing.environments import check_environment

    report = check_environment(MetaWorldEnvironment, MetaWorldConfig(task="reach-v3", image_size=32), cameras=True)
    assert report["observation"]["camera_obs/corner"] == [[2, 32, 32, 3], "uint8"]
    assert report["action_dim"] == 4 and report["protocol"]["benchmark"] == "metaworld"


def test_camera_frames_are_uint8_of_configured_size():
    config = MetaWorldConfig(task="reach-v3", image_size=64, camera="corner")
    env = MetaWorldEnvironment(config, num_envs=1, cameras=True)  # renders one frame on reset
    try:
        obs = env.reset_envs([0], [0])
        frames = obs["camera_obs"]["corner"]
        assert frames.dtype == np.uint8 and frames.shape == (1, 64, 64, 3)
        assert frames.std() > 0  # a picture, not a blank buffer
        np.testing.assert_array_equal(env.render(0), frames[0])  # no second render
    finally:
        env.close()


def test_without_meta_world_installed_the_error_names_the_extra(monkeypatch):
    import sys

    from arena.extras import MissingExtraError

    monkeypatch.setitem(sys.modules, "metaworld", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'arena-core\[metaworld\]'"):
        MetaWorldEnvironment(MetaWorldConfig(task="reach-v3"), num_envs=1)


def test_episode_info_carries_the_protocol_fingerprint_of_the_episodes(reach2):
    from importlib import metadata

    protocol = reach2.episode_info(1)["protocol"]
    assert protocol["benchmark"] == "metaworld" and protocol["suite_version"] == metadata.version("metaworld")
    assert protocol["simulators"]["mujoco"] == metadata.version("mujoco")
    assert protocol["init_states"]["count"] == 50 and protocol["step_limit"] == 500
    assert protocol["cameras"] == [] and protocol["image_size"] is None  # cameras off: no image size to compare
