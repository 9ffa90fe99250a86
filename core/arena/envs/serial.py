"""``SerialEnvironment``: the base of simulators whose batch is ``num_envs`` instances stepped
one after another in this process (Meta-World, franka_kitchen, LIBERO, ALOHA).

What such a simulator needs besides its own physics is the same every time, and lives here:

- ``num_envs < 1`` is refused (``ValueError``) before anything is built;
- ``reset_envs`` checks its arguments (:meth:`~arena.envs.base.Environment.check_reset`: ints,
  one seed per env id, ids in range), resets each env with its own episode seed through the
  subclass's :meth:`SerialEnvironment._reset_one` and returns the batched observation;
  :meth:`SerialEnvironment._start_episodes` gives every env an episode of seed 0 at
  construction, so stepping before the first ``reset_envs`` works;
- the batched observation is stacked from one Arena-layout observation per env
  (:meth:`SerialEnvironment._observe_one`, :func:`stack_observations`);
- ``close`` (the base's) is idempotent and runs the subclass's ``_release`` once;
  ``__del__`` closes on a best-effort basis (``close`` is the contract).

Each subclass keeps what its simulator needs: building the instances, ``_reset_one`` (how an
episode seed becomes that simulator's episode), ``step`` (action dtype, clipping, how reward,
success and termination are read), ``render`` and ``_release``. An episode is fixed by its seed
alone, whichever env runs it and whatever ran before, so a batch gives the same records split
over any number of env workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from arena.envs.base import Environment, EnvironmentConfig

_T = TypeVar("_T")


def stack_observations(observations: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The batched Arena-layout observation of one observation per env.

    Each element is one env's observation in the Arena layout without the env dimension
    (``{"camera_obs": {name: uint8 (H, W, 3)}, "policy": {name: float (D,)}, "task": str}``);
    the result has the same keys, in the same order, with arrays stacked along a new first
    axis (``(num_envs, ...)``, dtype kept) and strings gathered in a ``list[str]`` of
    ``num_envs``. Nested mappings are stacked key by key. The arrays are new: later changes
    to the per-env values do not reach them.

    Raises:
        ValueError: no observations, or the envs' observations differ in their keys or in an
            array's shape.
    """
    if not observations:
        raise ValueError("no observations to stack")
    first = observations[0]
    if any(obs.keys() != first.keys() for obs in observations[1:]):
        raise ValueError(f"the envs' observations differ in their keys: {[list(o) for o in observations]}")
    out: dict[str, Any] = {}
    for key, value in first.items():
        values = [obs[key] for obs in observations]
        if isinstance(value, Mapping):
            out[key] = stack_observations(values)
        elif isinstance(value, str):
            out[key] = [str(v) for v in values]
        else:
            out[key] = np.stack([np.asarray(v) for v in values])
    return out


class SerialEnvironment(Environment):
    """``num_envs`` instances of one simulator in this process, stepped one env at a time.

    Subclasses call ``super().__init__`` first (it refuses ``num_envs < 1``), build their
    instances, then :meth:`_start_episodes`; they implement :meth:`_reset_one`,
    :meth:`_observe_one`, ``step``, ``render`` and (when they hold resources) ``_release``
    (:meth:`arena.envs.base.Environment.close` runs it once).

    Raises:
        ValueError: ``num_envs < 1``.
    """

    def __init__(self, config: EnvironmentConfig, *, num_envs: int, cameras: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        super().__init__(config, num_envs=num_envs, cameras=cameras)

    # -- what every serial simulator does the same way ---------------------------------------

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        """Start an episode of seed ``seeds[k]`` on env ``env_ids[k]`` (one after another, see
        the subclass's ``_reset_one``); return the full batched observation.

        Raises:
            ValueError: as :meth:`~arena.envs.base.Environment.check_reset`.
        """
        env_ids, seeds = self.check_reset(env_ids, seeds)
        for env_id, seed in zip(env_ids, seeds):
            self._reset_one(env_id, seed)
        return self._observation()

    def _start_episodes(self) -> None:
        """Give every env an episode of seed 0, so stepping before a reset works."""
        self.reset_envs(list(range(self.num_envs)), [0] * self.num_envs)

    def _observation(self) -> dict[str, Any]:
        """The batched observation: :meth:`_observe_one` of every env, stacked."""
        return stack_observations([self._observe_one(e) for e in range(self.num_envs)])

    @staticmethod
    def _close_each(items: Iterable[_T], close: Callable[[_T], object]) -> None:
        """``close(item)`` for every item, ignoring what they raise: freeing must never hide
        the run's own result (e.g. a viewer the benchmark never opened)."""
        for item in items:
            try:
                close(item)
            except Exception:
                pass

    # -- what each simulator does its own way ------------------------------------------------

    def _reset_one(self, env_id: int, seed: int) -> None:
        """Start env ``env_id``'s episode of seed ``seed`` (an int; the same seed is the same
        episode on any env) and keep what :meth:`_observe_one` reads."""
        raise NotImplementedError

    def _observe_one(self, env_id: int) -> dict[str, Any]:
        """Env ``env_id``'s current observation in the Arena layout, without the env dimension
        (see :func:`stack_observations`)."""
        raise NotImplementedError
