"""How a LIBERO episode's random layout is seeded (the ``libero`` environment's ``seeding``).

LIBERO's only randomness is numpy's global RNG (``ControlEnv.seed(s)`` is
``np.random.seed(s)``), and only ``reset()`` draws from it: the placement samplers put the
task's objects *and fixtures* (cabinets, stoves, racks) at random. ``set_init_state(state)``
afterwards restores the objects' poses from the task's fixed init state, but fixtures are
part of the model rebuilt at each reset, so they stay where the reset put them: the RNG state
before the reset changes what the cameras see although the init state is the same
(measured: the agentview differs in 12 % of its pixels, ``reference/benchmarks.md``).
Stepping and ``set_init_state`` draw nothing.

Modes (:data:`SEEDING_MODES`):

``reference`` (default)
    openpi's ``examples/libero/main.py`` (openpi 15a9616, lines 85, 93, 195): one env per
    task, ``env.seed(7)`` once, then for episode ``k`` ``env.reset()`` and
    ``set_init_state(initial_states[k])``, never reseeding. So the episode on init state
    ``k`` resets from the RNG state "seed 7, then ``k`` resets". :class:`ReferenceRngStates`
    computes those states once per task (by running the resets; a LIBERO reset costs about a
    second of CPU on 2 cores, far more on a loaded machine) and keeps one per init state, so
    any env of any worker can run any init state and results do not depend on
    ``num_envs`` or ``workers``.

``episode_seed``
    arena before this option: ``np.random.seed(s)`` with the episode seed ``s`` before each
    reset. Reproducible run to run, but no seed gives openpi's layouts.

LIBERO's own lifelong evaluation (``libero/lifelong/evaluate.py`` and ``metric.py`` of
Lifelong-Robot-Learning/LIBERO 8f1084e) seeds differently again: 20 ``SubprocVectorEnv``
workers forked from a process seeded by ``control_seed(cfg.seed)``; ``env.reset()`` runs
*before* ``env.seed(cfg.seed)`` (evaluate.py) or without any seed call (metric.py), so the
layouts depend on the global RNG state each forked worker inherits from the training
script, not on the init-state index. No per-episode rule reproduces that outside the
training process, so it is documented here and not offered as a mode.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

#: Values of the ``libero`` environment's ``seeding`` option.
SEEDING_MODES = ("reference", "episode_seed")
Seeding = Literal["reference", "episode_seed"]
#: openpi's ``Args.seed`` in ``examples/libero/main.py``: ``env.seed(7)`` once per task.
REFERENCE_SEED = 7

#: numpy's legacy RNG state, as ``np.random.get_state()`` returns it.
RngState = tuple[str, np.ndarray, int, int, float]


class ReferenceRngStates:
    """The global-RNG state openpi's LIBERO evaluation has before the reset of each init state.

    ``state(k, sim)`` is the state after ``np.random.seed(7)`` and ``k`` LIBERO resets. States
    are computed on first need, in order, by resetting ``sim`` (a LIBERO ``ControlEnv`` of the
    task: the one about to be reset for the episode, so that no other env's running episode
    is touched), and kept. The global RNG is left as it was found.
    """

    def __init__(self, seed: int = REFERENCE_SEED) -> None:
        saved = np.random.get_state()
        np.random.seed(seed)
        self._states: list[RngState] = [np.random.get_state()]
        np.random.set_state(saved)

    def __len__(self) -> int:
        return len(self._states)

    def state(self, init_state: int, sim: Any) -> RngState:
        """The RNG state before the reset of the episode on ``init_state`` (>= 0); ``sim`` is
        reset as often as states are missing.

        Raises:
            ValueError: ``init_state < 0``.
        """
        if init_state < 0:
            raise ValueError(f"init_state must be >= 0, got {init_state}")
        saved = np.random.get_state()
        try:
            while len(self._states) <= init_state:
                np.random.set_state(self._states[-1])
                sim.reset()
                self._states.append(np.random.get_state())
        finally:
            np.random.set_state(saved)
        return self._states[init_state]

    def reset_done(self, init_state: int) -> None:
        """Note that a reset from ``state(init_state)`` just ran: the global RNG now holds
        ``state(init_state + 1)``, kept when not known yet (episodes run in init-state order
        then cost no extra resets)."""
        if len(self._states) == init_state + 1:
            self._states.append(np.random.get_state())


def seed_reset(sim: Any, mode: str, *, seed: int, init_state: int, reference: ReferenceRngStates | None) -> None:
    """Put the global RNG where ``mode`` wants it for the episode, then ``sim.reset()``.

    ``seed``: the episode seed; ``init_state``: the init-state index the episode restores.

    Raises:
        ValueError: an unknown ``mode``, or ``reference`` mode without ``reference``.
    """
    if mode == "reference":
        if reference is None:
            raise ValueError("seeding 'reference' needs the task's ReferenceRngStates")
        np.random.set_state(reference.state(init_state, sim))
        sim.reset()
        reference.reset_done(init_state)
    elif mode == "episode_seed":
        sim.seed(int(seed) % 2**32)
        sim.reset()
    else:
        raise ValueError(f"unknown LIBERO seeding {mode!r}; expected one of {', '.join(SEEDING_MODES)}")
