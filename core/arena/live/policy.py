"""``LivePolicy``: any policy executed live, per :mod:`arena.live.schedule`.

``arena run-one`` wraps a run's policy in it when ``execution.mode`` is ``live``; the rollout
drives it like any policy (one ``(num_envs, action_dim)`` action per step), and it asks the
wrapped policy for whole chunks through :class:`arena.live.chunks.ChunkSource`.

Two clocks:

- ``simulated``: each request is answered at once, and the env executes the hold rule for the
  request's drawn delay ``d`` (:class:`~arena.live.schedule.DelaySampler`), then the chunk from
  row ``d``: an episode is a function of its seed and the delays, on any machine or layout;
- ``measured``: every step starts at the next tick of the environment's control clock
  (``1 / control_hz`` seconds; a step that takes longer starts the next at once); a due env's
  request is sent from a background thread (one batch in flight at a time) and the env
  executes the hold rule, one step per tick, until the reply is there; ``d`` is the steps it
  took. The episode's first chunk is waited for in both (the clock starts when it arrives).
  Resetting or re-activating envs while a request is in flight waits for it (the wrapped
  policy is called from one thread at a time), so an episode boundary may stretch one tick.

With ``execution.rtc`` each request carries ``inference_delay`` (simulated: the drawn ``d``;
measured: ``ceil(max latency of the episode's last 100 requests * control_hz)``, LeRobot's
estimate), ``execute_horizon`` and ``prev_chunk_left_over`` (:meth:`EnvSchedule.rtc_fields`).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from arena.live.chunks import ChunkSource, prepare
from arena.live.config import ExecutionConfig
from arena.live.schedule import DelaySampler, EnvSchedule
from arena.live.episode_stats import episode_live
from arena.policies.base import PolicyBase


class LivePolicy(PolicyBase):
    """``inner`` executed live (module docstring).

    Args:
        inner: the run's policy, not started.
        execution: the run's ``execution`` section (``mode: live``).
        hold: the resolved hold rule (:meth:`ExecutionConfig.resolve_hold`).
        control_hz: the environment's control rate (``None``: unknown; then only simulated
            delays in steps).
        clock, sleep: the wall clock and sleep of a measured clock (tests pass fakes).
    """

    def __init__(
        self, inner: PolicyBase, execution: ExecutionConfig, *, hold: str, control_hz: float | None,
        clock: Callable[[], float] = time.perf_counter, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(inner.config)
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # records name the wrapped policy
        self.execution = execution
        self.hold = hold
        self.control_hz = control_hz
        self.measured = execution.clock == "measured"
        self._clock, self._sleep = clock, sleep
        s = execution.execute_horizon
        self.rows = s + (s if self.measured else max(execution.delay.step_values(control_hz)))
        prepare(inner, self.rows)
        self.schedules: list[EnvSchedule] = []
        self._samplers: list[DelaySampler | None] = []
        self._latency: list[list[float]] = []
        self._began: list[float | None] = []
        self._last: list[float] = []
        self._generation: list[int] = []
        self._waited: list[int] = []
        self._pool: ThreadPoolExecutor | None = None
        self._future: Future | None = None
        self._pending: dict[int, int] = {}  # env -> generation of the request in flight
        self._tick: float | None = None
        self.overruns = 0

    # -- what the records and the plan read ----------------------------------------------------
    @property
    def adapter(self) -> Any:
        return getattr(self.inner, "adapter", None)

    @property
    def is_remote(self) -> bool:
        return self.inner.is_remote

    def server_metadata(self) -> dict[str, Any] | None:
        return self.inner.server_metadata()

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, env: Any) -> None:
        self.inner.start(env)
        n = env.num_envs
        self.action_dim = int(np.prod(env.action_space.shape))
        null = getattr(env, "null_action", None)
        self.schedules = [
            EnvSchedule(self.hold, self.execution.execute_horizon,
                        None if not callable(null) or null(e) is None else np.asarray(null(e), np.float64))
            for e in range(n)
        ]
        self._samplers = [None] * n
        self._latency = [[] for _ in range(n)]
        self._began = [None] * n
        self._last = [0.0] * n
        self._generation = [0] * n
        self._waited = [0] * n
        self.source = ChunkSource(self.inner, self.rows)
        if self.measured:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-live")

    def set_task_description(self, text: str | None) -> str | None:
        self.inner.set_task_description(text)
        return super().set_task_description(text)

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        ids = list(range(len(self.schedules))) if env_ids is None else [int(e) for e in env_ids]
        seeds = list(seeds) if seeds is not None else [0] * len(ids)
        with self.source.lock:
            self.inner.reset(env_ids, seeds)
        for e, seed in zip(ids, seeds):
            self.schedules[e].reset()
            self._samplers[e] = DelaySampler(self.execution.delay, self.control_hz, seed) if not self.measured else None
            self._latency[e] = []
            self._began[e] = None
            self._generation[e] += 1
            self._waited[e] = 0

    def set_active(self, env_ids: Sequence[int]) -> None:
        super().set_active(env_ids)
        with self.source.lock:
            self.inner.set_active(env_ids)

    def _active(self) -> list[int]:
        return [e for e in range(len(self.schedules)) if self.is_active(e)]

    # -- one step ------------------------------------------------------------------------------
    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        """``float64 (num_envs, action_dim)``: each active env's scheduled action (idle rows zero).

        Raises:
            arena.errors.PolicyError: a request failed for some envs (their episodes end as errors).
        """
        active = self._active()
        if self.measured:
            self._wait_for_tick()
            self._collect(active)
        first = [e for e in active if self.schedules[e].first and e not in self._pending]
        due = first if self.measured else [e for e in active if self.schedules[e].due]
        if due:
            delays = {e: 0 if self.schedules[e].first else self._samplers[e].next() for e in due}  # type: ignore[union-attr]
            chunks, ms = self._request(env, observation, due, active, delays)
            for e in due:
                self._latency[e].append(ms)
                self.schedules[e].plan(chunks[e], delays[e])
            if self.measured:
                # an episode's first chunk is waited for: the next step is a full period after
                # this one's action, not after the tick that preceded the wait
                self._tick = self._clock() + 1.0 / self.control_hz  # type: ignore[operator]
        if self.measured:
            self._send_due(env, observation, active)
        out = np.zeros((len(self.schedules), self.action_dim), np.float64)
        now = self._clock()
        for e in active:
            schedule = self.schedules[e]
            if self._began[e] is None:
                self._began[e] = now
            self._last[e] = now
            if schedule.queue:
                out[e] = schedule.pop()[0]
            else:  # measured: the request is in flight; hold
                out[e] = schedule.hold_action(self._waited[e], self.action_dim)
                schedule.execute(out[e], True)
                self._waited[e] += 1
        return out

    def _request(
        self, env: Any, observation: Any, due: list[int], active: list[int], delays: dict[int, int]
    ) -> tuple[dict[int, np.ndarray], float]:
        fields = {e: self.schedules[e].rtc_fields(delays[e]) for e in due} if self.execution.rtc else None
        started = time.perf_counter()
        chunks = self.source.request(env, observation, due, active, fields)
        return chunks, (time.perf_counter() - started) * 1e3

    # -- the measured clock --------------------------------------------------------------------
    def _wait_for_tick(self) -> None:
        assert self.control_hz
        period = 1.0 / self.control_hz
        now = self._clock()
        if self._tick is not None:
            if now < self._tick:
                self._sleep(self._tick - now)
                now = self._tick
            elif now > self._tick + period:
                self.overruns += 1  # the step took longer than a control period: no catching up
        self._tick = now + period

    def _send_due(self, env: Any, observation: Any, active: list[int]) -> None:
        if self._future is not None:
            return
        due = [e for e in active if self.schedules[e].due and not self.schedules[e].first]
        if not due:
            return
        delays = {e: self._estimate(e) for e in due}
        obs = copy.deepcopy(observation)  # the simulator steps on while the request is in flight
        self._pending = {e: self._generation[e] for e in due}
        for e in due:
            self._waited[e] = 0
        assert self._pool is not None
        self._future = self._pool.submit(self._request, env, obs, due, active, delays)

    def _estimate(self, env_id: int) -> int:
        recent = self._latency[env_id][-100:]
        return int(math.ceil(max(recent) / 1e3 * self.control_hz)) if recent and self.control_hz else 0

    def _collect(self, active: list[int]) -> None:
        """Accept the reply in flight, if it is there: ``d`` = the steps each env held meanwhile."""
        future = self._future
        if future is None or not future.done():
            return
        pending, self._future, self._pending = self._pending, None, {}
        chunks, ms = future.result()  # a PolicyError names its envs
        for e, generation in pending.items():
            if generation != self._generation[e] or e not in active:
                continue  # the episode ended while its request was in flight
            schedule = self.schedules[e]
            self._latency[e].append(ms)
            schedule.delays.append(self._waited[e])
            schedule.accept(chunks[e], self._waited[e])

    # -- records -------------------------------------------------------------------------------
    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The wrapped policy's extras, plus ``live`` and the live ``metrics`` (:mod:`arena.live.episode_stats`)."""
        info = dict(self.inner.episode_info(env_id) or {})
        if not 0 <= env_id < len(self.schedules):
            return info
        began = self._began[env_id]
        live, metrics = episode_live(
            self.schedules[env_id], mode="live", clock=self.execution.clock, hold=self.hold,
            latency_ms=self._latency[env_id], elapsed_s=(self._last[env_id] - began) if began is not None else 0.0,
        )
        info["live"] = live
        info["metrics"] = {**dict(info.get("metrics") or {}), **metrics}
        return info

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.inner.close()


def live_policy(policy: PolicyBase, run: Any) -> LivePolicy:
    """``policy`` wrapped for the resolved ``run``'s live ``execution`` (hold rule and control
    rate from its environment class and config, as validated)."""
    execution = run.execution
    return LivePolicy(
        policy, execution,
        hold=execution.resolve_hold(run.environment_cls, run.environment),
        control_hz=run.environment_cls.control_hz_for(run.environment),
    )
