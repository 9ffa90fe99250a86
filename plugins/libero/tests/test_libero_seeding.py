"""LIBERO's seeding modes on a stand-in simulator whose ``reset`` draws from numpy's global RNG
as LIBERO's placement samplers do (a varying number of draws: rejection sampling), so the
layout of an episode depends only on the RNG state before its reset. The real simulator is
checked against openpi's loop in ``test_openpi_libero_reference.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena_libero.seeding import REFERENCE_SEED, SEEDING_MODES, ReferenceRngStates, seed_reset


class FakeSim:
    """``reset`` places fixtures with a rejection sampler on ``np.random``; ``seed`` is LIBERO's."""

    def __init__(self) -> None:
        self.layout: np.ndarray | None = None
        self.resets = 0

    def seed(self, seed: int) -> None:
        np.random.seed(seed)

    def reset(self) -> None:
        self.resets += 1
        while True:  # a variable number of draws, like LIBERO's UniformRandomSampler retries
            layout = np.random.uniform(-1, 1, 3)
            if np.linalg.norm(layout) < 1.0:
                break
        self.layout = layout


def openpi_layouts(n: int) -> list[np.ndarray]:
    """openpi's examples/libero/main.py: seed 7 once, then one reset per episode, never reseeding."""
    sim = FakeSim()
    sim.seed(REFERENCE_SEED)
    layouts = []
    for _ in range(n):
        sim.reset()
        layouts.append(sim.layout.copy())
    return layouts


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 11), min_size=1, max_size=12))
def test_reference_mode_gives_each_init_state_openpis_layout_in_any_order(order):
    expected = openpi_layouts(12)
    sim = FakeSim()
    states = ReferenceRngStates()
    np.random.seed(12345)  # whatever the global RNG holds before does not matter
    for k in order:
        seed_reset(sim, "reference", seed=1000 + k, init_state=k, reference=states)
        assert sim.layout.tobytes() == expected[k].tobytes(), k


def test_in_order_episodes_cost_no_extra_resets_and_the_global_rng_is_kept():
    states = ReferenceRngStates()
    sim = FakeSim()
    for k in range(5):
        seed_reset(sim, "reference", seed=k, init_state=k, reference=states)
    assert sim.resets == 5 and len(states) == 6  # one reset per episode, none to find states
    np.random.seed(99)
    before = np.random.get_state()[1].copy()
    helper = FakeSim()
    states.state(9, helper)
    assert helper.resets == 4 and np.array_equal(np.random.get_state()[1], before)


def test_finding_a_state_resets_only_the_env_being_reset():
    """Two envs of one process: env 1 jumping ahead must not reset env 0 mid-episode."""
    states = ReferenceRngStates()
    env0, env1 = FakeSim(), FakeSim()
    seed_reset(env0, "reference", seed=0, init_state=0, reference=states)
    layout0 = env0.layout.copy()
    seed_reset(env1, "reference", seed=7, init_state=7, reference=states)
    assert env0.resets == 1 and env0.layout.tobytes() == layout0.tobytes()
    assert env1.layout.tobytes() == openpi_layouts(8)[7].tobytes()


def test_episode_seed_mode_reseeds_before_each_reset_and_differs_from_the_reference():
    sim = FakeSim()
    seed_reset(sim, "episode_seed", seed=3, init_state=3, reference=None)
    first = sim.layout.copy()
    seed_reset(sim, "episode_seed", seed=3, init_state=3, reference=None)
    assert sim.layout.tobytes() == first.tobytes()
    assert first.tobytes() != openpi_layouts(4)[3].tobytes()


def test_bad_modes_are_refused():
    with pytest.raises(ValueError, match="unknown LIBERO seeding 'lifelong'"):
        seed_reset(FakeSim(), "lifelong", seed=0, init_state=0, reference=None)
    with pytest.raises(ValueError, match="needs the task's ReferenceRngStates"):
        seed_reset(FakeSim(), "reference", seed=0, init_state=0, reference=None)
    with pytest.raises(ValueError, match=">= 0"):
        ReferenceRngStates().state(-1, FakeSim())
    assert SEEDING_MODES == ("reference", "episode_seed")


def test_the_config_defaults_to_reference_and_refuses_unknown_modes():
    from pydantic import ValidationError

    from arena_libero.env import LiberoConfig

    assert LiberoConfig(task=0).seeding == "reference"
    assert LiberoConfig(task=0, seeding="episode_seed").seeding == "episode_seed"
    with pytest.raises(ValidationError, match="seeding"):
        LiberoConfig(task=0, seeding="lifelong")
