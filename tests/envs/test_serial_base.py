"""``SerialEnvironment``: what every simulator stepped one env at a time gets from the base."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.envs.base import EnvironmentConfig
from arena.envs.serial import SerialEnvironment, stack_observations


class Counting(SerialEnvironment):
    """A simulator whose per-env state is its last seed; counts what the base calls."""

    name = "counting"
    success_key = None

    def __init__(self, config: EnvironmentConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self.seeds = [-1] * num_envs
        self.releases = 0
        self._start_episodes()

    def _reset_one(self, env_id: int, seed: int) -> None:
        self.seeds[env_id] = seed

    def _observe_one(self, env_id: int) -> dict[str, Any]:
        seed = self.seeds[env_id]
        return {
            "policy": {"seed": np.array([seed], np.int64), "half": np.full(2, seed / 2, np.float32)},
            "camera_obs": {"cam": np.full((2, 3, 3), seed % 256, np.uint8)},
            "task": f"task {seed}",
        }

    def _release(self) -> None:
        self.releases += 1


def test_num_envs_below_one_is_refused_before_anything_is_built():
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        Counting(EnvironmentConfig(), num_envs=0)


def test_construction_starts_seed_0_episodes_and_reset_stacks_the_arena_layout():
    env = Counting(EnvironmentConfig(), num_envs=3)
    assert env.seeds == [0, 0, 0]
    obs = env.reset_envs([2, 0], [7, 5])
    assert env.seeds == [5, 0, 7]
    assert obs["policy"]["seed"].shape == (3, 1) and obs["policy"]["seed"][:, 0].tolist() == [5, 0, 7]
    assert obs["policy"]["half"].dtype == np.float32 and obs["policy"]["half"].shape == (3, 2)
    assert obs["camera_obs"]["cam"].dtype == np.uint8 and obs["camera_obs"]["cam"].shape == (3, 2, 3, 3)
    assert obs["task"] == ["task 5", "task 0", "task 7"]
    with pytest.raises(ValueError, match="out of range"):
        env.reset_envs([3], [1])
    with pytest.raises(ValueError, match="2 env_ids but 1 seeds"):
        env.reset_envs([0, 1], [1])
    assert env.check_env_id(2) == 2
    with pytest.raises(ValueError, match="env id -1 out of range 0..2"):
        env.check_env_id(-1)


def test_close_releases_once_and_del_never_raises():
    env = Counting(EnvironmentConfig(), num_envs=1)
    env.close()
    env.close()
    assert env.releases == 1
    env.__del__()
    assert env.releases == 1

    class Failing(Counting):
        def _release(self) -> None:
            raise RuntimeError("the simulator would not close")

    broken = Failing(EnvironmentConfig(), num_envs=1)
    with pytest.raises(RuntimeError):
        broken.close()
    broken.__del__()  # closed already: nothing runs again, nothing raised


def test_close_each_ignores_what_single_closes_raise():
    closed = []

    def close(item: int) -> None:
        closed.append(item)
        if item == 1:
            raise OSError("viewer never opened")

    SerialEnvironment._close_each([0, 1, 2], close)
    assert closed == [0, 1, 2]


def test_stacked_arrays_are_copies_and_mismatched_envs_are_refused():
    rows = [{"policy": {"x": np.zeros(2)}}, {"policy": {"x": np.ones(2)}}]
    stacked = stack_observations(rows)
    rows[0]["policy"]["x"][:] = 5
    assert stacked["policy"]["x"].tolist() == [[0, 0], [1, 1]]
    with pytest.raises(ValueError, match="differ in their keys"):
        stack_observations([{"a": np.zeros(1)}, {"b": np.zeros(1)}])
    with pytest.raises(ValueError):
        stack_observations([{"a": np.zeros(1)}, {"a": np.zeros(2)}])
    with pytest.raises(ValueError, match="no observations"):
        stack_observations([])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=6),
    st.sampled_from([np.uint8, np.float32, np.float64, np.int64]),
)
def test_stacking_keeps_order_dtype_and_values(values, dtype):
    rows = [{"policy": {"v": np.array([v, v]).astype(dtype)}, "task": str(v)} for v in values]
    stacked = stack_observations(rows)
    assert stacked["policy"]["v"].dtype == dtype and stacked["policy"]["v"].shape == (len(values), 2)
    assert np.array_equal(stacked["policy"]["v"][:, 0], np.array(values).astype(dtype))
    assert stacked["task"] == [str(v) for v in values]


def test_check_actions_casts_to_the_simulators_dtype_and_refuses_bad_shapes_and_nan():
    import numpy as np
    import pytest

    from arena.testing.envs import ToyReachConfig, ToyReachEnv

    env = ToyReachEnv(ToyReachConfig(), num_envs=2)
    out = env.check_actions([[0.1, 0.2], [0.3, 0.4]], 2, np.float32)
    assert out.dtype == np.float32 and out.shape == (2, 2)
    with pytest.raises(ValueError, match=r"actions must have shape \(2, 2\), got \(2, 3\)"):
        env.check_actions(np.zeros((2, 3)), 2)
    with pytest.raises(ValueError, match="actions hold NaN or infinite values"):
        env.check_actions([[np.nan, 0.0], [0.0, 0.0]], 2)
    assert np.isnan(env.check_actions([[np.nan, 0.0], [0.0, 0.0]], 2, finite=False)[0, 0])
