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
evaluation computes the initial chunk before its loop. A new chunk with fewer than ``s``
rows ends its cycle early (the next request comes when it runs out).

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


@dataclass
class EnvSchedule:
    """One env's live schedule: a queue of ``(action, stale)`` for the steps to come.

    ``stale`` marks steps executed from the hold rule (no fresh row of the newest chunk).
    """

    hold: str
    execute_horizon: int
    null_action: np.ndarray | None = None
    queue: deque = field(default_factory=deque)
    #: The not-yet-executed rows of the newest chunk, ``(R, A)`` (``continue_chunk``, RTC requests).
    leftover: np.ndarray | None = None
    #: The action executed last (``repeat_last``).
    last: np.ndarray | None = None
    #: Requests accepted since :meth:`reset` (0: the next is the episode's first, waited for).
    requests: int = 0
    steps: int = 0
    stale_steps: int = 0
    hold_past_chunk: int = 0
    delays: list[int] = field(default_factory=list)

    def reset(self) -> None:
        """A new episode: nothing queued, no previous chunk, counters at zero."""
        self.queue.clear()
        self.leftover = self.last = None
        self.requests = self.steps = self.stale_steps = self.hold_past_chunk = 0
        self.delays = []

    @property
    def due(self) -> bool:
        """Whether the env needs a new chunk before its next step."""
        return not self.queue

    @property
    def first(self) -> bool:
        """Whether the next request is the episode's first (waited for, ``d = 0``)."""
        return self.requests == 0

    def hold_action(self, k: int, action_dim: int) -> np.ndarray:
        """The action of the ``k``-th step (from 0) since the pending request was sent."""
        if self.hold == "continue_chunk" and self.leftover is not None and len(self.leftover):
            if k < len(self.leftover):
                return self.leftover[k]
            self.hold_past_chunk += 1
            return self.leftover[-1]
        if self.hold == "null_action" and self.null_action is not None:
            null = self.null_action
            if self.last is not None and np.isnan(null).any():  # NaN: keep that dimension's last value
                return np.where(np.isnan(null), self.last, null)
            return np.nan_to_num(null)
        if self.last is not None:  # repeat_last, or continue_chunk with nothing left
            return self.last
        return self.null_action if self.null_action is not None else np.zeros(action_dim)

    def accept(self, chunk: np.ndarray, delay: int) -> None:
        """Queue a new chunk ``(H, A)`` that arrived ``delay`` steps after its request: rows
        ``delay .. execute_horizon - 1``; rows from ``execute_horizon`` on become the leftover."""
        chunk = np.asarray(chunk, np.float64)
        s = self.execute_horizon
        for row in chunk[delay:s]:
            self.queue.append((row, False))
        self.leftover = chunk[s:].copy()
        self.requests += 1

    def plan(self, chunk: np.ndarray, delay: int) -> None:
        """Simulated delay: queue ``delay`` hold steps, then :meth:`accept` the chunk."""
        chunk = np.asarray(chunk, np.float64)
        for k in range(delay):
            self.queue.append((np.array(self.hold_action(k, chunk.shape[1]), np.float64), True))
        if self.requests:  # the episode's first request is waited for: no delay to record
            self.delays.append(int(delay))
        self.accept(chunk, delay)
        if not self.queue:  # d >= the chunk's rows: nothing fresh, hold one step, ask again
            self.queue.append((np.array(self.hold_action(delay, chunk.shape[1]), np.float64), True))

    def pop(self) -> tuple[np.ndarray, bool]:
        """The next step's ``(action, stale)``, counted.

        Raises:
            IndexError: nothing is queued (the env is :attr:`due`).
        """
        action, stale = self.queue.popleft()
        self.execute(action, stale)
        return action, stale

    def execute(self, action: np.ndarray, stale: bool) -> None:
        """Count one executed step (``stale``: from the hold rule)."""
        self.last = np.asarray(action, np.float64)
        self.steps += 1
        self.stale_steps += int(stale)

    def rtc_fields(self, delay: int) -> dict[str, object]:
        """The Real-Time Chunking fields of the next request (LeRobot's names):
        ``inference_delay`` (steps) and ``prev_chunk_left_over`` (``float32 (R, A)``, the
        newest chunk's not-yet-executed rows in the environment's action space, ``R >= 0``;
        absent before the episode's first chunk) and ``execute_horizon``."""
        fields: dict[str, object] = {"inference_delay": int(delay), "execute_horizon": int(self.execute_horizon)}
        if self.leftover is not None:
            fields["prev_chunk_left_over"] = np.asarray(self.leftover, np.float32)
        return fields
