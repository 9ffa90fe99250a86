"""Baseline policies: zero, random (seeded per episode) and replay."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from arena.errors import ConfigError
from arena.policies.simple import (
    RandomActionPolicy,
    ReplayPolicy,
    ZeroActionPolicy,
)


def fake_env(num_envs: int = 3, low=-1.0, high=1.0, dim: int = 4):
    """The two attributes policies read: ``num_envs`` and ``action_space``."""
    space = gym.spaces.Box(low, high, (dim,), np.float32)
    return SimpleNamespace(num_envs=num_envs, action_space=space)


def test_zero_action_is_zero_float32_per_env():
    env = fake_env(3)
    policy = ZeroActionPolicy(ZeroActionPolicy.Config())
    policy.start(env)
    actions = policy.get_action(env, {})
    assert actions.dtype == np.float32 and actions.shape == (3, 4)
    assert not actions.any()
    with pytest.raises(ValidationError):
        ZeroActionPolicy.Config(seed=1)


def test_random_actions_are_float32_inside_the_box():
    env = fake_env(
        5, low=np.float32([-1, 0, 2, -np.inf]), high=np.float32([1, 0.5, 3, np.inf])
    )
    policy = RandomActionPolicy(RandomActionPolicy.Config(seed=1))
    policy.start(env)
    policy.reset(list(range(5)), list(range(5)))
    actions = np.concatenate([policy.get_action(env, {}) for _ in range(50)])
    assert actions.dtype == np.float32 and actions.shape == (250, 4)
    assert np.all(actions[:, 0] >= -1) and np.all(actions[:, 0] <= 1)
    assert np.all(actions[:, 1] >= 0) and np.all(actions[:, 1] <= 0.5)
    assert np.all(actions[:, 2] >= 2) and np.all(actions[:, 2] <= 3)
    assert np.all(np.abs(actions[:, 3]) <= 1)  # unbounded: treated as [-1, 1]
    assert np.unique(actions[:, 0]).size > 200


def test_random_action_scale_shrinks_the_range():
    env = fake_env(2)
    policy = RandomActionPolicy(RandomActionPolicy.Config(action_scale=0.1))
    policy.start(env)
    assert np.all(np.abs(policy.get_action(env, {})) <= 0.1 + 1e-7)
    zero = RandomActionPolicy(RandomActionPolicy.Config(action_scale=0.0))
    assert not zero.get_action(env, {}).any()
    with pytest.raises(ValidationError):
        RandomActionPolicy.Config(action_scale=-1)


def test_random_actions_depend_on_episode_seed_not_env_id():
    def actions_of(policy, env, env_id, seed, steps=5):
        policy.reset([env_id], [seed])
        return np.stack([policy.get_action(env, {})[env_id] for _ in range(steps)])

    one, four = fake_env(1), fake_env(4)
    a = RandomActionPolicy(RandomActionPolicy.Config(seed=3))
    b = RandomActionPolicy(RandomActionPolicy.Config(seed=3))
    a.start(one)
    b.start(four)
    actions_of(b, four, 3, seed=99)  # something else ran on env 3 first
    np.testing.assert_array_equal(actions_of(a, one, 0, 7), actions_of(b, four, 3, 7))
    assert not np.array_equal(actions_of(a, one, 0, 7), actions_of(a, one, 0, 8))
    other = RandomActionPolicy(RandomActionPolicy.Config(seed=4))
    other.start(one)
    assert not np.array_equal(actions_of(a, one, 0, 7), actions_of(other, one, 0, 7))


def test_replay_from_npz_plays_rows_per_env_then_zeros(tmp_path):
    rows = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "actions.npz"
    np.savez(path, actions=rows)
    env = fake_env(2)
    policy = ReplayPolicy(ReplayPolicy.Config(path=str(path)))
    policy.start(env)
    policy.reset()
    np.testing.assert_array_equal(policy.get_action(env, {}), rows[[0, 0]])
    policy.reset([1], [5])  # env 1 starts a new episode: its cursor rewinds
    out = policy.get_action(env, {})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, rows[[1, 0]])
    policy.get_action(env, {})
    np.testing.assert_array_equal(policy.get_action(env, {}), np.stack([np.zeros(4), rows[2]]))


def test_replay_from_json_and_jsonl_with_loop(tmp_path):
    rows = [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]]
    (tmp_path / "a.json").write_text(json.dumps({"actions": rows}))
    (tmp_path / "b.json").write_text(json.dumps(rows))
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps({"actions": r}) for r in rows))
    env = fake_env(1)
    for name in ("a.json", "b.json", "c.jsonl"):
        policy = ReplayPolicy(ReplayPolicy.Config(path=str(tmp_path / name), loop=True))
        policy.start(env)
        played = [policy.get_action(env, {})[0] for _ in range(3)]
        np.testing.assert_allclose(played, np.float32([rows[0], rows[1], rows[0]]))


def test_replay_width_mismatch_names_the_file(tmp_path):
    path = tmp_path / "seven.npz"
    np.savez(path, actions=np.zeros((5, 7)))
    policy = ReplayPolicy(ReplayPolicy.Config(path=str(path)))
    with pytest.raises(ConfigError, match="seven.npz.*7 columns.*dimension is 4"):
        policy.start(fake_env(2))


def test_replay_bad_files_are_config_errors(tmp_path):
    np.savez(tmp_path / "other.npz", other=np.zeros((2, 4)))
    with pytest.raises(ConfigError, match="no array 'actions'.*other"):
        ReplayPolicy(ReplayPolicy.Config(path=str(tmp_path / "other.npz")))
    with pytest.raises(ConfigError, match="missing.npz"):
        ReplayPolicy(ReplayPolicy.Config(path=str(tmp_path / "missing.npz")))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ConfigError, match="objects.npy"):  # never unpickled
        ReplayPolicy(ReplayPolicy.Config(path=str(tmp_path / "objects.npy")))
    (tmp_path / "ragged.json").write_text("[[1, 2], [3]]")
    with pytest.raises(ConfigError, match="ragged.json"):
        ReplayPolicy(ReplayPolicy.Config(path=str(tmp_path / "ragged.json")))
