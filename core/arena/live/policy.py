"""``LivePolicy``: any policy executed live, per :mod:`arena.live.schedule`.

``arena run-one`` wraps a run's policy in it when ``execution.mode`` is ``live``; the rollout
drives it like any policy (one ``(num_envs, action_dim)`` action per step), and it asks the
wrapped policy for whole chunks through :class:`arena.live.chunks.ChunkSource`.

Two clocks:

- ``simulated``: each request is answered at once, and the env executes the hold rule for the
  request's drawn delay ``d`` (:class:`~arena.live.schedule.DelaySampler`), then the chunk from
  row ``d``; an episode's first chunk is waited for (``d = 0``): an episode is a function of
  its seed and the delays, on any machine or layout;
- ``measured``: every step starts at the next tick of the environment's control clock
  (``1 / control_hz`` seconds; a step that takes longer starts the next at once). **Each env
  keeps its own schedule on that clock**: a due env's request (an episode's first included) is
  sent from a background thread and the env executes the hold rule, one step per tick, until
  the reply is there; ``d`` is the steps *that env* executed meanwhile. Nothing waits: an env
  starting an episode, or the wrapped policy being reset, never stops another env's clock
  (every call into the wrapped policy -- requests, resets, activations -- runs in order on that
  one thread). The wrapped policy serves one call at a time: envs whose requests overlap queue
  behind each other, and that wait is part of their delay (it is what sharing a server costs).

**Before an episode's first chunk** (measured clock) nothing waits: the env executes its null
action, zeros where it declares none (absolute targets), and the first chunk's rows are
executed from the step it arrives at. This is what vla-eval 0.8.0's live runner does
(``runners/live_runner.py``: ``wait_first_action`` defaults to false, the step loop starts at
once and ``ActionBuffer`` returns ``benchmark.get_hold_action(None)``, which is the embodiment's
null action or, for absolute targets, ``repeat_last_hold(None)``: zeros), and LeRobot's RTC
rollout does not wait either (``lerobot/rollout/strategies/core.py`` ``send_next_action``: an
empty action queue sends the robot no command). Those steps have no age (``None``) and count
as stale. An absolute-target env (PushT) therefore drives toward zeros until the first chunk;
a simulated clock waits for it instead (``d = 0``, RTC's evaluation).

**Step-served policies** (a policy with ``live_step_rows``: a server that answers one row per
observation from a chunk buffer of that many rows, vla-eval's ``PredictModelServer``) are
streamed as vla-eval's live runner streams them: every step sends that step's observation
(measured: as soon as it exists, queued on the live thread in order, so the server sees the
same observations in the same order as over vla-eval's pipelined websocket -- each one,
though, only once the previous reply is back, a round trip later while a backlog drains;
simulated: answered at once and arriving ``d`` drawn steps later, the episode's first at once,
in order), and the env executes the newest reply that has arrived (one superseded within a
step is never executed, as ``ActionBuffer``), else the hold rule (``continue_chunk`` has no
chunk to continue: it repeats the last action). A reply's age
counts from the observation the server's model ran on (``step_rows * (k // step_rows)`` for the
episode's ``k``-th observation: the buffer answers the others, vla-eval's
``_try_serve_from_buffer``), never from the observation that fetched it; its delay is the steps
from sending to arrival. ``execute_horizon`` sets no cadence here.

Every executed action's **age** (control steps since the observation it was computed from;
``None`` for the null action) is recorded per step (:mod:`arena.live.episode_stats`).

With ``execution.rtc`` each request carries ``inference_delay`` (simulated: the drawn ``d``;
measured: LeRobot's RTC estimate -- the largest delay of the episode's last 100 requests -- over
the requests after the episode's first, whose delay includes a warm-up, and clipped to
``execute_horizon``), ``execute_horizon`` and ``prev_chunk_left_over``
(:meth:`EnvSchedule.rtc_fields`).
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from arena.errors import PolicyError
from arena.live.chunks import ChunkSource, prepare
from arena.live.config import ExecutionConfig
from arena.live.episode_stats import episode_live
from arena.live.schedule import DelaySampler, EnvSchedule, ShortChunkError
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
        self.max_delay = 0 if self.measured else max(execution.delay.step_values(control_hz))
        self.rows = s + (s if self.measured else self.max_delay)
        #: a step-served policy (a server that answers one row per observation from a chunk of
        #: this many rows, vla-eval's buffer): streamed, an observation every control step
        step_rows = getattr(inner, "live_step_rows", None)
        self.step_rows: int | None = int(step_rows) if step_rows else None
        prepare(inner, 1 if self.step_rows else self.rows)
        if hasattr(inner, "execution_mode"):  # a client that tells its server the mode (vla-eval's EPISODE_START)
            inner.execution_mode = "live"
        self.schedules: list[EnvSchedule] = []
        self._samplers: list[DelaySampler | None] = []
        self._latency: list[list[float]] = []
        self._began: list[float | None] = []
        self._last: list[float] = []
        self._generation: list[int] = []
        self._waited: list[int] = []
        self._request_steps: list[list[int]] = []  # per env, the step each request of its episode was sent at
        self._pool: ThreadPoolExecutor | None = None
        #: measured: env -> (the future of its request in flight, its episode's generation, the step it saw)
        self._pending: dict[int, tuple[Future, int, int]] = {}
        self._resets: dict[int, Future] = {}  # measured: env -> its wrapped policy's reset, queued
        #: streamed: per env, the replies to come, in order: (future or ready step, generation, sent step, source step, row)
        self._stream: list[deque] = []
        self._tick: float | None = None
        self._ticked = False
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
        leftover_rows = self.max_delay if self.hold == "continue_chunk" else 0
        self.schedules = [
            EnvSchedule(self.hold, self.execution.execute_horizon,
                        None if not callable(null) or null(e) is None else np.asarray(null(e), np.float64),
                        leftover_rows=leftover_rows)
            for e in range(n)
        ]
        self._samplers = [None] * n
        self._latency = [[] for _ in range(n)]
        self._began = [None] * n
        self._last = [0.0] * n
        self._generation = [0] * n
        self._waited = [0] * n
        self._request_steps = [[] for _ in range(n)]
        self._stream = [deque() for _ in range(n)]
        self.source = ChunkSource(self.inner, 1 if self.step_rows else self.rows)
        if self.measured:
            # one thread makes every call into the wrapped policy, in the order they were made
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-live")

    def set_task_description(self, text: str | None) -> str | None:
        self.inner.set_task_description(text)
        return super().set_task_description(text)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Future | None:
        """``fn(*args)`` on the wrapped policy: measured, queued on its thread and never waited
        for (the future; a reset's failure ends its envs' episodes at the next step); simulated, now."""
        if self._pool is None:
            with self.source.lock:
                fn(*args)
            return None
        return self._pool.submit(fn, *args)

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        ids = list(range(len(self.schedules))) if env_ids is None else [int(e) for e in env_ids]
        seeds = list(seeds) if seeds is not None else [0] * len(ids)
        done = self._call(self.inner.reset, env_ids, seeds)
        for e, seed in zip(ids, seeds):
            if done is not None:
                self._resets[e] = done
            self.schedules[e].reset()
            self._samplers[e] = DelaySampler(self.execution.delay, self.control_hz, seed) if not self.measured else None
            self._latency[e] = []
            self._began[e] = None
            self._generation[e] += 1
            self._waited[e] = 0
            self._request_steps[e] = []
            self._stream[e].clear()  # replies for the ended episode are dropped
            self._pending.pop(e, None)  # a reply for the ended episode is dropped

    def set_active(self, env_ids: Sequence[int]) -> None:
        super().set_active(env_ids)
        self._call(self.inner.set_active, list(env_ids))

    def _active(self) -> list[int]:
        return [e for e in range(len(self.schedules)) if self.is_active(e)]

    # -- one step ------------------------------------------------------------------------------
    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        """``float64 (num_envs, action_dim)``: each active env's scheduled action (idle rows zero).

        Raises:
            arena.errors.PolicyError: a request failed for some envs, or a chunk had fewer rows
                than the schedule executes (their episodes end as errors).
        """
        active = self._active()
        if self.step_rows:
            return self._stream_step(env, observation, active)
        if self.measured:
            if not self._ticked:  # a retry of this step (the rollout asks again after a PolicyError) waits no tick
                self._wait_for_tick()
                self._ticked = True
            self._collect(active)
            self._send_due(env, observation, active)
            self._ticked = False
        else:
            due = [e for e in active if self.schedules[e].due]
            if due:
                delays = {e: 0 if self.schedules[e].first else self._samplers[e].next() for e in due}  # type: ignore[union-attr]
                for e in due:
                    self._request_steps[e].append(self.schedules[e].steps)
                chunks, ms = self._request(env, observation, due, active, delays)
                short: dict[int, str] = {}
                for e in due:
                    self._latency[e].append(ms)
                    try:
                        self.schedules[e].plan(chunks[e], delays[e])
                    except ShortChunkError as exc:
                        short[e] = str(exc)
                if short:
                    raise PolicyError(next(iter(short.values())), env_ids=sorted(short), env_errors=short)
        out = self._stamp(active)
        for e in active:
            schedule = self.schedules[e]
            if schedule.queue:
                out[e] = schedule.pop()[0]
            else:  # measured: the request is in flight; hold
                stay = self._stay_action(env, observation, e) if schedule.last is None else None
                action, source = schedule.hold_action(self._waited[e], self.action_dim, stay)
                out[e] = action
                schedule.execute(out[e], True, source)
                self._waited[e] += 1
        return out

    def _stay_action(self, env: Any, observation: Any, e: int) -> np.ndarray | None:
        """Env ``e``'s stay action now (``None``: the env declares none), as float64."""
        stay = getattr(env, "stay_action", None)
        value = stay(observation, e) if callable(stay) else None
        return None if value is None else np.asarray(value, np.float64).reshape(self.action_dim)

    def _stamp(self, active: list[int]) -> np.ndarray:
        """Note this control tick's time as the latest step of each env in ``active`` (and the
        first of a new episode); return the zero ``(num_envs, action_dim)`` float64 batch the
        tick's actions go into."""
        now = self._clock()
        for e in active:
            if self._began[e] is None:
                self._began[e] = now
            self._last[e] = now
        return np.zeros((len(self.schedules), self.action_dim), np.float64)

    def _request(
        self, env: Any, observation: Any, due: list[int], active: list[int], delays: dict[int, int],
        sent: float | None = None,
    ) -> tuple[dict[int, np.ndarray], float]:
        """``(chunks, ms)``: ``ms`` from ``sent`` (measured: when the env sent it, so a wait
        behind another call on the live thread counts) to the reply."""
        rtc = self.execution.rtc and not self.step_rows  # a streamed server gets observations only
        fields = {e: self.schedules[e].rtc_fields(delays[e]) for e in due} if rtc else None
        started = time.perf_counter() if sent is None else sent
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
        """Send one request for the active envs that are due and have none in flight."""
        due = [e for e in active if self.schedules[e].due and e not in self._pending]
        if not due:
            return
        delays = {e: self._estimate(e) for e in due}
        obs = copy.deepcopy(observation)  # the simulator steps on while the request is in flight
        assert self._pool is not None
        future = self._pool.submit(self._request, env, obs, due, active, delays, time.perf_counter())
        for e in due:
            self._waited[e] = 0
            self._pending[e] = (future, self._generation[e], self.schedules[e].steps)
            self._request_steps[e].append(self.schedules[e].steps)

    def _estimate(self, env_id: int) -> int:
        """RTC's ``inference_delay`` for the env's next request (module docstring)."""
        delays = self.schedules[env_id].delays
        later = delays[1:] or delays[:1]  # the episode's first request includes a warm-up
        return min(max(later[-100:]), self.execution.execute_horizon) if later else 0

    def _reset_failures(self, active: list[int]) -> dict[int, str]:
        """``{env: reason}`` of the active envs whose queued reset of the wrapped policy failed."""
        failures: dict[int, str] = {}
        for e, done in list(self._resets.items()):
            if done.done():
                del self._resets[e]
                if done.exception() is not None and e in active:
                    exc = done.exception()
                    failures[e] = f"reset failed: {type(exc).__name__}: {exc}"
                    self._pending.pop(e, None)
                    self._stream[e].clear()
        return failures

    def _collect(self, active: list[int]) -> None:
        """Accept each env's reply that is there: ``d`` = the steps that env held meanwhile."""
        failures = self._reset_failures(active)
        failed: PolicyError | None = None
        for e, (future, generation, source) in list(self._pending.items()):
            if not future.done():
                continue
            del self._pending[e]
            if generation != self._generation[e] or e not in active:
                continue  # the episode ended while its request was in flight
            try:
                chunks, ms = future.result()
            except PolicyError as exc:
                named = exc.env_ids if exc.env_ids is not None else [e]
                if e in named:
                    failures[e], failed = exc.for_env(e).partition(": ")[2], exc
                continue
            except Exception as exc:  # anything else from the wrapped policy ends this env's episode
                failures[e] = f"live request failed: {type(exc).__name__}: {exc}"
                continue
            schedule = self.schedules[e]
            self._latency[e].append(ms)
            try:
                schedule.accept(chunks[e], self._waited[e], source)
            except ShortChunkError as exc:
                failures[e] = str(exc)
                continue
            schedule.delays.append(self._waited[e])
        if failures:
            message = failed.args[0] if failed is not None else next(iter(failures.values()))
            raise PolicyError(str(message), env_ids=sorted(failures), env_errors=failures)

    # -- step-served policies: an observation every control step --------------------------------
    def _stream_step(self, env: Any, observation: Any, active: list[int]) -> np.ndarray:
        """One step of a step-served policy (:attr:`step_rows`; module docstring): send this
        step's observation of every active env, then execute, per env, the newest reply that is
        there (vla-eval's live runner's ``ActionBuffer``: a reply superseded within one step is
        never executed) or the hold rule.

        Raises:
            arena.errors.PolicyError: a request failed, or a reply held more than one row.
        """
        if not self._ticked:  # a retry of this step (after a PolicyError) sends nothing again
            if self.measured:
                # sent as soon as it exists (vla-eval's runner sends it right after env.step), then the tick
                obs = copy.deepcopy(observation)  # the simulator steps on while the request is queued
                assert self._pool is not None
                future = self._pool.submit(self._request, env, obs, list(active), active, {e: 0 for e in active},
                                           time.perf_counter())
                for e in active:
                    self._stream_sent(e, future)
                self._wait_for_tick()
            elif active:
                chunks, ms = self._request(env, observation, list(active), active, {e: 0 for e in active})
                for e in active:
                    delay = 0 if not self._request_steps[e] else self._samplers[e].next()  # type: ignore[union-attr]
                    self._latency[e].append(ms)
                    self._stream_sent(e, self.schedules[e].steps + delay, chunks[e])
            self._ticked = True
        failures = self._reset_failures(active)
        fresh: dict[int, tuple[np.ndarray, int]] = {}
        for e in active:
            if e in failures:
                continue
            try:
                newest = self._stream_arrived(e)
            except PolicyError as exc:
                failures[e] = exc.for_env(e).partition(": ")[2]
                continue
            except Exception as exc:  # anything else from the wrapped policy ends this env's episode
                failures[e] = f"live request failed: {type(exc).__name__}: {exc}"
                continue
            if newest is not None:
                fresh[e] = newest
        if failures:
            raise PolicyError(next(iter(failures.values())), env_ids=sorted(failures), env_errors=failures)
        self._ticked = False
        out = self._stamp(active)
        for e in active:
            schedule = self.schedules[e]
            if e in fresh:
                out[e] = fresh[e][0]
                schedule.execute(out[e], False, fresh[e][1])
            else:
                action, source = schedule.hold_action(0, self.action_dim)
                out[e] = action
                schedule.execute(out[e], True, source)
        return out

    def _stream_sent(self, env_id: int, due: Any, chunk: np.ndarray | None = None) -> None:
        """Queue the reply to the observation env ``env_id`` sends now; ``due``: its future
        (measured) or the step it arrives at (simulated, ``chunk`` the reply).

        Its **source** (the step of the observation the model ran on): the server runs its
        model on every ``step_rows``-th observation of the episode and answers the others from
        the chunk that call returned (vla-eval 0.8.0 ``model_servers/predict.py``,
        ``_try_serve_from_buffer``), so the reply to the episode's observation ``k`` comes
        from observation ``step_rows * (k // step_rows)``."""
        sent = self._request_steps[env_id]
        step = self.schedules[env_id].steps
        sent.append(step)
        k = len(sent) - 1
        source = sent[(k // self.step_rows) * self.step_rows]  # type: ignore[operator]
        self._stream[env_id].append((due, self._generation[env_id], step, source, chunk))

    def _stream_arrived(self, env_id: int) -> tuple[np.ndarray, int] | None:
        """``(action, source)`` of the newest reply for ``env_id`` that has arrived (each one's
        delay recorded: the steps since its observation was sent), or ``None``.

        Raises:
            arena.errors.PolicyError: its request failed, or a reply held more than one row.
        """
        queue, schedule = self._stream[env_id], self.schedules[env_id]
        newest = None
        while queue:
            due, generation, sent, source, chunk = queue[0]
            if isinstance(due, Future) and not due.done() or not isinstance(due, Future) and due > schedule.steps:
                break
            queue.popleft()
            if generation != self._generation[env_id]:
                continue
            if isinstance(due, Future):
                try:
                    chunks, ms = due.result()
                except PolicyError as exc:
                    if exc.env_ids is not None and env_id not in exc.env_ids:
                        continue  # another env's failure: no reply for this one from that request
                    raise
                chunk = chunks[env_id]
                self._latency[env_id].append(ms)
            chunk = np.asarray(chunk, np.float64)
            if len(chunk) != 1:
                raise PolicyError(
                    f"the server answered an observation with {len(chunk)} rows; a step-served policy (one row per "
                    f"observation, from a buffer of {self.step_rows}) is streamed one row per step: configure the "
                    "server's chunk size (vla-eval: server_args.chunk_size) so that it answers one",
                    env_ids=[env_id], env_errors={env_id: f"{len(chunk)} rows in one reply"},
                )
            schedule.requests += 1
            schedule.delays.append(int(schedule.steps - sent))
            newest = (chunk[0], source)
        return newest

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
            fixed_delay=not self.measured and len(set(self.execution.delay.step_values(self.control_hz))) == 1,
        )
        info["live"] = live
        info["trajectory_columns"] = {"live_age": np.array([-1 if a is None else a for a in live["ages"]], np.int64)}
        reconnects = info.get("reconnects")
        if isinstance(reconnects, dict):  # the wrapped policy counts its calls, not the env's steps
            steps = self._request_steps[env_id]
            reconnects["at_step"] = [steps[r] if r < len(steps) else None for r in reconnects.get("at_request", [])]
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
