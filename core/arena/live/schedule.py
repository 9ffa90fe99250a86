"""Which action the simulator executes at each step of one env in live mode (pure, no I/O).

Real-Time Chunking's protocol (Black et al. 2025, arXiv 2506.07339; its ``eval_flow.py``):
a chunk is requested every ``s`` steps (the execute horizon); while the request is in flight
for ``d`` steps (``s >= d``) the simulator executes the **hold** rule, then rows ``d .. s-1``
of the new chunk; rows ``s ..`` of that chunk are its not-yet-executed part, which the
``continue_chunk`` hold executes during the next request. One cycle of ``s`` steps::

    step      t        t+1  ...  t+d-1 | t+d   ...  t+s-1 | t+s (next request)
    executes  hold(0)  hold(1)   hold(d-1) new[d] ...  new[s-1]

Hold rules: ``continue_chunk`` -> ``leftover[k]`` (the previous chunk's row ``s + k``; past
its end its last row, counted in ``hold_past_chunk``); ``repeat_last`` -> the last executed
action; ``null_action`` -> the environment's null action, whose NaN entries keep the last
executed value of their dimension (an absolute gripper command beside delta arm motion). The first chunk of an episode is
waited for (the simulator starts its clock when it arrives: ``d = 0``, no hold), as RTC's
evaluation computes the initial chunk before its loop (measured clocks: in flight like any
other, :mod:`arena.live.policy`). A chunk with fewer than ``s`` rows (or, with
``continue_chunk`` on a simulated delay, fewer than ``s`` plus the largest delay) is a
:class:`ShortChunkError`: no step silently repeats a row the schedule meant to be fresh.
Every queued action carries the step of the observation it was computed from, so each
executed action's age is known (:attr:`EnvSchedule.ages`).

:class:`DelaySampler` draws each request's simulated ``d`` from ``(seed, episode seed)``
only, so the same seed gives the same delays on any machine, env slot or worker layout.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from arena.live.config import DelayConfig


class DelaySampler:
    """The simulated delays (control steps) of one episode's requests, in order.

    Args:
        delay: the run's ``execution.delay``.
        control_hz: the environment's control rate (needed for a delay in ms).
        episode_seed: the episode's seed (``seed + episode index``).
    """

    def __init__(self, delay: DelayConfig, control_hz: float | None, episode_seed: int) -> None:
        self.values = delay.step_values(control_hz)
        self.p = None if delay.p is None else np.asarray(delay.p, np.float64) / np.sum(delay.p)
        # SeedSequence takes non-negative entropy: fold negative seeds into the upper half
        self._rng = np.random.default_rng([int(delay.seed) % 2**63, int(episode_seed) % 2**63])

    def next(self) -> int:
        """The next request's delay ``d >= 0`` (a fixed delay draws nothing)."""
        if len(self.values) == 1:
            return self.values[0]
        return int(self.values[int(self._rng.choice(len(self.values), p=self.p))])


class ShortChunkError(ValueError):
    """A chunk with fewer rows than the schedule executes from it (``rows``, ``needed``)."""

    def __init__(self, rows: int, needed: int, why: str) -> None:
        super().__init__(
            f"the policy answered a chunk of {rows} rows; this live schedule needs at least {needed} ({why}): "
            "lower execute_horizon or the delay, or serve longer chunks"
        )
        self.rows, self.needed = rows, needed


@dataclass
class EnvSchedule:
    """One env's live schedule: a queue of ``(action, stale, source)`` for the steps to come.

    ``stale`` marks steps executed from the hold rule (no fresh row of the newest chunk);
    ``source`` is the env's step whose observation the action was computed from (``None``: the
    null action, computed from no observation). An executed action's **age** is the step it
    runs at minus its source (:attr:`ages`).

    Args:
        hold: the hold rule.
        execute_horizon: ``s``.
        null_action: the environment's null action (``None``: zeros).
        leftover_rows: rows past ``s`` a chunk must have (``continue_chunk`` with a simulated
            delay: the largest delay, which the next request's hold executes); fewer is a
            :class:`ShortChunkError`.
    """

    hold: str
    execute_horizon: int
    null_action: np.ndarray | None = None
    leftover_rows: int = 0
    queue: deque = field(default_factory=deque)
    #: The not-yet-executed rows of the newest chunk, ``(R, A)`` (``continue_chunk``, RTC requests).
    leftover: np.ndarray | None = None
    #: The step whose observation the newest chunk was computed from.
    leftover_source: int | None = None
    #: The action executed last (``repeat_last``) and the step of its observation.
    last: np.ndarray | None = None
    last_source: int | None = None
    #: Requests accepted since :meth:`reset` (0: the next is the episode's first).
    requests: int = 0
    steps: int = 0
    stale_steps: int = 0
    hold_past_chunk: int = 0
    delays: list[int] = field(default_factory=list)
    #: Per executed step: its action's age in control steps (``None``: the null action).
    ages: list = field(default_factory=list)

    def reset(self) -> None:
        """A new episode: nothing queued, no previous chunk, counters at zero."""
        self.queue.clear()
        self.leftover = self.last = self.leftover_source = self.last_source = None
        self.requests = self.steps = self.stale_steps = self.hold_past_chunk = 0
        self.delays = []
        self.ages = []

    @property
    def due(self) -> bool:
        """Whether the env needs a new chunk before its next step."""
        return not self.queue

    @property
    def first(self) -> bool:
        """Whether the next request is the episode's first."""
        return self.requests == 0

    def hold_action(self, k: int, action_dim: int, stay: np.ndarray | None = None) -> tuple[np.ndarray, int | None]:
        """``(action, source)`` of the ``k``-th step (from 0) since the pending request was sent.

        ``stay``: the environment's stay action for this step
        (:meth:`arena.envs.base.Environment.stay_action`), what an absolute-control env holds
        before the episode's first action exists; without it, the null action, else zeros.
        """
        if self.hold == "continue_chunk" and self.leftover is not None and len(self.leftover):
            if k < len(self.leftover):
                return self.leftover[k], self.leftover_source
            self.hold_past_chunk += 1
            return self.leftover[-1], self.leftover_source
        if self.hold == "null_action" and self.null_action is not None:
            null = self.null_action
            keep = self.last if self.last is not None else stay
            if keep is not None and np.isnan(null).any():  # NaN: keep that dimension's value
                return np.where(np.isnan(null), keep, null), None
            return np.nan_to_num(null), None
        if self.last is not None:  # repeat_last, or continue_chunk with nothing left
            return self.last, self.last_source
        if stay is not None:
            return stay, None
        return (np.nan_to_num(self.null_action) if self.null_action is not None else np.zeros(action_dim)), None

    def accept(self, chunk: np.ndarray, delay: int, source: int) -> None:
        """Queue a new chunk ``(H, A)``, computed from step ``source``'s observation, that
        arrived ``delay`` steps after its request: rows ``delay .. execute_horizon - 1``; rows
        from ``execute_horizon`` on become the leftover.

        Raises:
            ShortChunkError: ``H < execute_horizon`` (rows the schedule executes are missing:
                never repeated silently), or fewer than ``leftover_rows`` past it.
        """
        chunk = np.asarray(chunk, np.float64)
        s = self.execute_horizon
        if len(chunk) < s:
            raise ShortChunkError(len(chunk), s, f"execute_horizon {s}")
        if len(chunk) < s + self.leftover_rows:
            raise ShortChunkError(
                len(chunk), s + self.leftover_rows,
                f"execute_horizon {s} + the {self.leftover_rows} rows continue_chunk holds during the largest delay",
            )
        for r in range(delay, s):
            self.queue.append((chunk[r], False, source))
        self.leftover = chunk[s:].copy()
        self.leftover_source = source
        self.requests += 1

    def plan(self, chunk: np.ndarray, delay: int) -> None:
        """Simulated delay: queue ``delay`` hold steps, then :meth:`accept` the chunk (computed
        from this step's observation).

        Raises:
            ShortChunkError: as :meth:`accept`; nothing is queued then.
        """
        chunk = np.asarray(chunk, np.float64)
        source = self.steps
        held = [self.hold_action(k, chunk.shape[1]) for k in range(delay)]
        leftover = (self.leftover, self.leftover_source, self.requests)
        try:
            self.accept(chunk, delay, source)
        except ShortChunkError:
            self.leftover, self.leftover_source, self.requests = leftover
            raise
        for k, (action, held_source) in enumerate(held):
            self.queue.insert(k, (np.array(action, np.float64), True, held_source))
        if self.requests > 1:  # the episode's first request is waited for: no delay to record
            self.delays.append(int(delay))
        if not self.queue:  # d >= s: nothing fresh, hold one step, ask again
            action, held_source = self.hold_action(delay, chunk.shape[1])
            self.queue.append((np.array(action, np.float64), True, held_source))

    def pop(self) -> tuple[np.ndarray, bool]:
        """The next step's ``(action, stale)``, counted.

        Raises:
            IndexError: nothing is queued (the env is :attr:`due`).
        """
        action, stale, source = self.queue.popleft()
        self.execute(action, stale, source)
        return action, stale

    def execute(self, action: np.ndarray, stale: bool, source: int | None) -> None:
        """Count one executed step (``stale``: from the hold rule; ``source``: the step of the
        observation ``action`` was computed from, ``None`` for none)."""
        self.ages.append(None if source is None else int(self.steps - source))
        self.last = np.asarray(action, np.float64)
        self.last_source = source
        self.steps += 1
        self.stale_steps += int(stale)

    def rtc_fields(self, delay: int) -> dict[str, object]:
        """The Real-Time Chunking fields of the next request (LeRobot's names):
        ``inference_delay`` (steps, ``0 <= d <= execute_horizon``) and ``prev_chunk_left_over``
        (``float32 (R, A)``, the newest chunk's not-yet-executed rows in the environment's
        action space, ``R >= 0``; absent before the episode's first chunk) and ``execute_horizon``."""
        d = min(max(int(delay), 0), int(self.execute_horizon))
        fields: dict[str, object] = {"inference_delay": d, "execute_horizon": int(self.execute_horizon)}
        if self.leftover is not None:
            fields["prev_chunk_left_over"] = np.asarray(self.leftover, np.float32)
        return fields
