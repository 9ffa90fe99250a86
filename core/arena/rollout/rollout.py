"""The rollout loop: ``num_envs`` envs take work items from a queue until none is left.

Outcomes (``rollout_limit``: ``max_episode_steps`` — else the env's
``default_max_episode_steps`` — and ``terminate_on_success``), decided after every step:

Success is read from ``info[env.success_key]`` (:func:`arena.envs.base.read_success`). A
declared key missing from ``info`` ends the running episodes as ``error`` and aborts the run
(an integration fault, never a failure count); an env declaring ``success_key = None`` adds
its warning to :attr:`RolloutSummary.warnings`.

- ``success``: ``info["success"]`` is true and ``terminate_on_success`` is set;
- the simulator terminated the episode: ``success`` if ``info["success"]`` is true on that
  step, else ``failure``;
- the step limit was reached (or the simulator truncated the episode): ``timeout`` — except
  that with ``terminate_on_success`` false the outcome is ``success`` when ``info["success"]``
  is true on the episode's last step (the state the episode ends in is what counts);
- ``error``: infrastructure failed. A :class:`arena.errors.PolicyError` ends the episodes of
  its ``env_ids`` (all envs when ``None``; every running episode when none of its envs is
  running one), those envs start new items and the rollout asks the policy again for the same
  step — so a policy raising it must not advance per-env state of the envs it did not name.
  Envs that the environment names in ``info["env_errors"]`` after a step, or in a
  :class:`arena.errors.SimulatorError` carrying an ``observation`` from ``reset_envs``, end
  only their own episodes (e.g. their worker process died); the other envs' results of that
  step or reset are kept. Any other exception from the policy or the env ends every running
  episode.

After ``max_consecutive_errors`` error episodes with no successful ``get_action`` between, the
rollout aborts (the episodes one environment fault or one failed policy call ends together
count once): it hands out no more work, leaves queued and running items unrecorded (so a
resume runs them) and returns ``aborted=True`` with the reason.

Determinism: each episode resets its env and the policy from the episode's own seed, so an
episode's outcome depends only on its seed, never on ``num_envs`` or on which env ran it.
Envs without an episode (the queue ran dry) are stepped with the batch and ignored: the
policy is told which envs are active (``policy.set_active``) whenever that changes, so it
asks its server only for those, and an idle env is stepped with its last applied action
again (never zeros, which would move a robot driven by absolute joint targets).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arena.envs.base import ENV_ERRORS, read_success, success_warning
from arena.errors import PolicyError, SimulatorError, SuccessSignalError
from arena.outputs.fingerprint import PROTOCOL_KEY, adapter_fingerprint
from arena.outputs.metrics import EpisodeMetrics, declared_metrics, step_values
from arena.outputs.records import OUTCOMES, EpisodeRecord, utc_now
from arena.rollout.workitems import WorkItem


@dataclass
class RolloutSummary:
    """What a rollout did. ``unfinished`` lists the items it left without a record."""

    episodes: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    steps: int = 0
    duration_s: float = 0.0
    aborted: bool = False
    cancelled: bool = False
    error: str | None = None
    unfinished: list[WorkItem] = field(default_factory=list)
    #: Caveats of the numbers that do not stop the run (e.g. no success signal).
    warnings: list[str] = field(default_factory=list)
    #: Why ``until`` ended the rollout early (a complete run, not an abort); ``None`` otherwise.
    stopped: str | None = None


@dataclass
class _Episode:
    item: WorkItem
    started: float = field(default_factory=time.perf_counter)
    steps: int = 0
    total_reward: float = 0.0
    metrics: EpisodeMetrics | None = None


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def rollout(
    env: Any,
    policy: Any,
    items: Iterable[WorkItem],
    limit: Any,
    *,
    on_episode_end: Callable[[EpisodeRecord], None],
    on_progress: Callable[[RolloutSummary], None] | None = None,
    max_consecutive_errors: int | None = 3,
    should_stop: Callable[[], bool] | None = None,
    task: str | None = None,
    policy_info: dict[str, Any] | None = None,
    recorder: Any = None,
    until: Callable[[], str | None] | None = None,
    trajectories: Any = None,
) -> RolloutSummary:
    """Run ``items`` on the vectorized ``env`` with ``policy``; return a :class:`RolloutSummary`.

    Args:
        env: an :class:`arena.envs.base.Environment` (already built; not closed here).
        policy: a :class:`arena.policies.base.PolicyBase` (not started yet; not closed here).
        items: the work items, run in order as envs become free; or a source that hands them
            out one at a time, ``take(wait) -> WorkItem | None`` and ``remaining()``
            (:class:`arena.rollout.claims.ClaimedItems`, the work queue's): asked whenever an env
            is free, and with ``wait=True`` when none is running (``None`` then ends the rollout).
        limit: ``rollout_limit`` (``max_episode_steps``: int | None, ``terminate_on_success``).
        on_episode_end: called with each finished episode's record (write it here).
        on_progress: called with the live summary after every env step.
        max_consecutive_errors: error episodes in a row that abort the rollout; ``None`` never.
        should_stop: polled before every step; when it returns true the rollout stops like an
            abort, with ``cancelled=True``.
        task, policy_info: the record's ``task`` and ``policy`` (``{"type", "variant"}``);
            default from ``env.config.task_name()`` and ``policy.name`` / ``config.variant()``.
        recorder: an :class:`arena.rollout.recording.EpisodeRecorder` (or ``None``): told when
            an env starts an episode, after every step and when an episode ends; the path it
            returns becomes the record's ``video``.
        until: asked after every recorded episode; a reason (e.g. an early-stopping rule's,
            :mod:`arena.outputs.stopping`) ends the rollout there, not as an abort:
            ``stopped`` holds it, no more work is handed out, running episodes are left
            unrecorded (``unfinished``) and episodes finishing in the same step are recorded.
        trajectories: an :class:`arena.rollout.trajectories.TrajectoryRecorder` (or ``None``):
            told when an env starts an episode, after every step (with the applied actions,
            rewards and flags) and when an episode ends; the path it returns becomes the
            record's ``trajectory``.

    A failure of ``policy.start`` aborts before any episode (nothing recorded). Exceptions
    other than :class:`Exception` subclasses (``KeyboardInterrupt``, cancellation) propagate.
    """
    loop = _Rollout(
        env,
        policy,
        items,
        limit,
        on_episode_end=on_episode_end,
        on_progress=on_progress,
        max_consecutive_errors=max_consecutive_errors,
        should_stop=should_stop,
        task=task if task is not None else _task_of(env),
        policy_info=policy_info if policy_info is not None else _policy_of(policy),
        recorder=recorder,
        until=until,
        trajectories=trajectories,
    )
    return loop.run()


def _task_of(env: Any) -> str | None:
    config = getattr(env, "config", None)
    task_name = getattr(config, "task_name", None)
    return task_name() if callable(task_name) else None


def _env_errors(info: Any, running: list[int]) -> dict[int, str]:
    """``info["env_errors"]`` restricted to the running envs, as ``{env_id: reason}``."""
    errors = info.get(ENV_ERRORS) if isinstance(info, dict) else None
    if not errors:
        return {}
    named = {int(e): str(reason) for e, reason in dict(errors).items()}
    return {e: named[e] for e in running if e in named}


def _episode_extras(source: Any, env_id: int) -> dict[str, Any]:
    """``source.episode_info(env_id)`` (a policy's or an environment's extra record fields)."""
    episode_info = getattr(source, "episode_info", None)
    if not callable(episode_info):
        return {}
    try:
        return dict(episode_info(env_id) or {})
    except Exception as exc:  # stats are a nicety; never lose the episode over them
        return {"episode_info_error": _describe(exc)}


def _protocol(env_protocol: Any, policy: Any) -> dict[str, Any] | None:
    """The record's protocol fingerprint (:mod:`arena.outputs.fingerprint`): the environment's,
    plus the policy's embodiment adapter when it has one."""
    adapter = adapter_fingerprint(getattr(policy, "adapter", None))
    if not isinstance(env_protocol, dict) and adapter is None:
        return None
    return {**(env_protocol if isinstance(env_protocol, dict) else {}), **({"adapter": adapter} if adapter else {})}


def _policy_of(policy: Any) -> dict[str, Any]:
    config = getattr(policy, "config", None)
    variant = getattr(config, "variant", None)
    return {
        "type": getattr(policy, "name", "") or type(policy).__name__,
        "variant": variant() if callable(variant) else None,
    }


class _ListSource:
    """Items known up front, handed out in order."""

    def __init__(self, items: Iterable[WorkItem]) -> None:
        self.queue: deque[WorkItem] = deque(items)

    def take(self, wait: bool = False) -> WorkItem | None:
        return self.queue.popleft() if self.queue else None

    def remaining(self) -> list[WorkItem]:
        return list(self.queue)


class _Rollout:
    def __init__(
        self, env, policy, items, limit, *, on_episode_end, on_progress, max_consecutive_errors, should_stop,
        task, policy_info, recorder=None, until=None, trajectories=None,
    ) -> None:
        self.env = env
        self.policy = policy
        self.source = items if hasattr(items, "take") else _ListSource(items)
        self.num_envs = int(env.num_envs)
        self.max_steps = int(getattr(limit, "max_episode_steps", None) or env.default_max_episode_steps)
        self.terminate_on_success = bool(getattr(limit, "terminate_on_success", True))
        self.on_episode_end = on_episode_end
        self.on_progress = on_progress
        self.max_errors = max_consecutive_errors
        self.should_stop = should_stop
        self.task = task
        self.policy_info = policy_info
        self.recorder = recorder
        self.trajectories = trajectories
        self.until = until
        self.active: list[_Episode | None] = [None] * self.num_envs
        self.consecutive_errors = 0
        self.obs: Any = None
        self.summary = RolloutSummary()
        self.stopping = False
        self.told_active: list[int] | None = None
        self.last_actions: np.ndarray | None = None
        self.metrics: dict[str, str] = {}

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> RolloutSummary:
        began = time.perf_counter()
        try:
            try:
                warning = success_warning(self.env)
            except SuccessSignalError as exc:
                self._abort(str(exc))
                return self.summary
            if warning:
                self.summary.warnings.append(warning)
            try:
                self.metrics = declared_metrics(self.env)
            except Exception as exc:  # a malformed declaration: systematic, before any episode
                self._abort(f"episode metrics: {_describe(exc)}")
                return self.summary
            try:
                self.policy.start(self.env)
                self.policy.set_task_description(self.env.task_description)
            except Exception as exc:  # e.g. the policy server is unreachable
                self._abort(f"policy failed to start: {_describe(exc)}")
                return self.summary
            self._start_episodes(list(range(self.num_envs)))
            while not self.stopping:
                running = [e for e, ep in enumerate(self.active) if ep is not None]
                if not running:  # a source may hand out more later (another runner's lapsed lease)
                    self._start_episodes(list(range(self.num_envs)), wait=True)
                    running = [e for e, ep in enumerate(self.active) if ep is not None]
                if not running:
                    break
                if self.should_stop is not None and self.should_stop():
                    self.summary.cancelled = True
                    self._abort("cancelled")
                    break
                self._step(running)
            return self.summary
        finally:
            self.summary.duration_s = time.perf_counter() - began
            try:
                warnings = list(getattr(self.policy, "run_warnings", lambda: [])() or [])
            except Exception as exc:  # a caveat must not lose the episodes
                warnings = [f"the policy's run_warnings failed: {_describe(exc)}"]
            self.summary.warnings += [w for w in warnings if w not in self.summary.warnings]
            if self.recorder is not None:
                self.recorder.close()  # videos of episodes left unfinished are dropped
            if self.trajectories is not None:
                self.trajectories.close()
            if self.stopping:
                self.summary.unfinished = [ep.item for ep in self.active if ep is not None] + self.source.remaining()

    def _step(self, running: list[int]) -> None:
        try:
            if running != self.told_active:
                self.policy.set_active(running)
                self.told_active = list(running)
            actions = self._hold_idle(self.policy.get_action(self.env, self.obs), running)
        except PolicyError as exc:
            named = range(self.num_envs) if exc.env_ids is None else exc.env_ids
            failed = [e for e in named if 0 <= e < self.num_envs and self.active[e] is not None] or running
            # one policy call that failed (one server fault) counts once, however many envs it ended
            self._fail(failed, {e: f"{type(exc).__name__}: {exc.for_env(e)}" for e in failed}, one_fault=True)
            return
        except Exception as exc:
            self._fail(running, f"policy failed: {_describe(exc)}")
            return
        self.consecutive_errors = 0
        try:
            obs, reward, terminated, truncated, info = self.env.step(actions)
        except Exception as exc:
            self._fail(running, f"environment step failed: {_describe(exc)}")
            return
        self.obs = obs
        self.summary.steps += 1
        reward = np.asarray(reward, dtype=np.float64).reshape(-1)
        terminated = np.asarray(terminated, dtype=bool).reshape(-1)
        truncated = np.asarray(truncated, dtype=bool).reshape(-1)
        try:
            success = read_success(self.env, info, self.num_envs)
        except SuccessSignalError as exc:  # systematic: every later step would fail the same way
            self._fail(running, str(exc), restart=False)
            self._abort(str(exc))
            return
        faults = _env_errors(info, running)
        stepped = [e for e in running if e not in faults]
        if self.recorder is not None:
            self.recorder.capture(self.env, stepped, obs)
        if self.trajectories is not None:
            self.trajectories.step(stepped, actions, obs, reward, success, terminated, truncated)
        ended: list[int] = list(faults)
        if faults:
            self._fail(list(faults), faults, restart=False, one_fault=True)
        values = step_values(info, self.metrics, self.num_envs)
        for e in stepped:
            episode = self.active[e]
            episode.steps += 1
            episode.total_reward += float(reward[e])
            if episode.metrics is not None:
                for key, column in values.items():
                    episode.metrics.add(key, column[e].item())  # a bool stays one
            outcome = self._outcome(episode, bool(success[e]), bool(terminated[e]), bool(truncated[e]))
            if outcome is not None:
                self._finish(e, outcome)
                ended.append(e)
        if self.on_progress is not None:
            self.on_progress(self.summary)
        if ended:
            self._start_episodes(ended)

    def _hold_idle(self, actions: Any, running: list[int]) -> Any:
        """``actions`` with each idle env's row replaced by the last action applied to it."""
        if self.last_actions is not None and len(running) < self.num_envs:
            actions = np.array(actions, copy=True)
            idle = np.ones(self.num_envs, dtype=bool)
            idle[running] = False
            actions[idle] = self.last_actions[idle]
        self.last_actions = np.array(actions, copy=True)
        return actions

    def _outcome(self, episode: _Episode, success: bool, terminated: bool, truncated: bool) -> str | None:
        if success and self.terminate_on_success:
            return "success"
        if terminated:
            return "success" if success else "failure"
        if truncated or episode.steps >= self.max_steps:
            return "success" if success else "timeout"
        return None

    # -- episodes --------------------------------------------------------------------------
    def _start_episodes(self, env_ids: list[int], wait: bool = False) -> None:
        """Give each of ``env_ids`` the next item and reset them; errors end those episodes.
        ``wait``: the first may wait for the source to have one (none is running)."""
        while env_ids and not self.stopping:
            ids: list[int] = []
            seeds: list[int] = []
            for e in env_ids:
                item = self.source.take(wait and not ids)
                if item is not None:
                    self.active[e] = _Episode(item, metrics=EpisodeMetrics(self.metrics) if self.metrics else None)
                    ids.append(e)
                    seeds.append(item.seed)
            if not ids:
                return
            lost: list[int] = []
            try:
                try:
                    self.obs = self.env.reset_envs(ids, seeds)
                except SimulatorError as exc:  # some envs lost (a worker died); the others reset
                    if exc.observation is None or exc.env_ids is None:
                        raise
                    failed = set(exc.env_ids)
                    lost = [e for e in ids if e in failed]
                    self.obs = exc.observation
                    self._fail(lost, f"reset failed: {_describe(exc)}", restart=False, one_fault=True)
                started = [e for e in ids if e not in lost]
                if started:
                    self.policy.reset(started, [s for e, s in zip(ids, seeds) if e not in lost])
            except Exception as exc:
                self._fail(ids, f"reset failed: {_describe(exc)}", restart=False)
                env_ids = ids
                continue
            for recorder in (self.recorder, self.trajectories):
                if recorder is not None:
                    for e in started:
                        recorder.begin(self.env, e, self.active[e].item, self.obs)
            if not lost:
                return
            env_ids = lost

    def _fail(
        self, env_ids: list[int], reason: str | dict[int, str], *, restart: bool = True, one_fault: bool = False
    ) -> None:
        """End the running episodes of ``env_ids`` as ``error`` (``reason``: one for all, or per
        env); ``one_fault``: they count once toward ``max_consecutive_errors``."""
        last = None
        for e in env_ids:
            if self.active[e] is not None and not self.stopping:
                last = reason[e] if isinstance(reason, dict) else reason
                self._finish(e, "error", last, count=not one_fault)
        if one_fault and last is not None and not self.stopping:
            self._count_error(last)
        if restart and not self.stopping:
            self._start_episodes(env_ids)

    def _finish(self, env_id: int, outcome: str, error: str | None = None, *, count: bool = True) -> None:
        episode = self.active[env_id]
        self.active[env_id] = None
        extras = _episode_extras(self.policy, env_id)
        columns = extras.pop("trajectory_columns", None)  # per-step arrays: the trajectory's, not the record's
        env_extras = _episode_extras(self.env, env_id)
        protocol = _protocol(env_extras.pop(PROTOCOL_KEY, None), self.policy)
        video = self.recorder.end(env_id, outcome) if self.recorder is not None else None
        trajectory = (
            self.trajectories.end(env_id, outcome, columns if isinstance(columns, dict) else None)
            if self.trajectories is not None else None
        )
        latency = extras.pop("latency", None)
        server_timing = extras.pop("server_timing", None)
        # numbers a policy measures per episode (live mode's delays, stale ratio, latency
        # percentiles: arena.live.episode_stats) join the environment's metrics, with their intervals
        policy_metrics = extras.pop("metrics", None)
        metrics = (episode.metrics.result() or None) if episode.metrics is not None else None
        if isinstance(policy_metrics, dict) and policy_metrics:
            metrics = {**(metrics or {}), **{str(k): float(v) for k, v in policy_metrics.items()}}
        record = EpisodeRecord(
            run=episode.item.run,
            episode_index=episode.item.episode_index,
            seed=episode.item.seed,
            env_id=env_id,
            task=self.task,
            policy=dict(self.policy_info),
            outcome=outcome,
            error=error,
            steps=episode.steps,
            duration_s=time.perf_counter() - episode.started,
            return_=episode.total_reward,
            latency=latency,
            server_timing=server_timing,
            video=video,
            finished_at=utc_now(),
            protocol=protocol,
            trajectory=trajectory,
            metrics=metrics,
            # a NaN/inf return or latency is flagged by the record itself (arena.outputs.records)
            non_finite=[f"metrics.{key}" for key in episode.metrics.non_finite] or None
            if episode.metrics is not None else None,
            **({"policy_extras": extras} if extras else {}),
            **({"env_extras": env_extras} if env_extras else {}),
        )
        self.on_episode_end(record)
        self.summary.episodes += 1
        self.summary.counts[outcome] += 1
        if self.until is not None and self.summary.stopped is None:
            self.summary.stopped = self.until()
            self.stopping = self.stopping or self.summary.stopped is not None
        if outcome == "error" and count:
            self._count_error(error)

    def _count_error(self, error: str | None) -> None:
        self.consecutive_errors += 1
        if self.max_errors is not None and self.consecutive_errors >= self.max_errors:
            self._abort(f"{self.consecutive_errors} consecutive error episodes; last: {error}")

    def _abort(self, reason: str) -> None:
        self.stopping = True
        self.summary.aborted = True
        self.summary.error = reason
