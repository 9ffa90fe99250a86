"""Small doubles for the live-mode tests: an environment whose observation is its step count,
and a chunked policy whose chunk rows say which request and row they are."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from arena.envs.base import Environment, EnvironmentConfig
from arena.policies.base import PolicyBase, PolicyConfig


class CounterConfig(EnvironmentConfig):
    task: str = "count"
    #: seed -> the step its episode terminates at (other seeds never terminate)
    lengths: dict[int, int] = {}
    #: declare a stay action: ``-(10 + t)`` at step ``t`` (as an absolute-control env's current pose)
    stay: bool = False


class CounterEnv(Environment):
    """``num_envs`` counters: the observation is each env's step within its episode; the
    executed actions are kept per env (``executed[e]``)."""

    name = "live_counter"
    Config = CounterConfig
    success_key = None
    hold_rules: ClassVar[tuple[str, ...]] = ("continue_chunk", "repeat_last", "null_action")
    control_hz: ClassVar[float | None] = 10.0
    action_space = gym.spaces.Box(-1000.0, 1000.0, (1,), np.float64)
    task_description = "count"

    def __init__(self, config: CounterConfig | None = None, *, num_envs: int = 1, cameras: bool = False) -> None:
        super().__init__(config or CounterConfig(), num_envs=num_envs, cameras=cameras)
        self.t = np.zeros(num_envs, np.int64)
        self.executed: list[list[float]] = [[] for _ in range(num_envs)]
        self.ends = np.full(num_envs, -1, np.int64)

    @classmethod
    def null_action_for(cls, config: Any) -> np.ndarray:
        return np.array([-1.0])

    @classmethod
    def stay_action_for(cls, config: Any, observation: dict[str, Any], env_id: int) -> np.ndarray | None:
        return -(10 + observation["policy"]["t"][env_id]) if config.stay else None

    def _obs(self) -> dict[str, Any]:
        return {"policy": {"t": self.t[:, None].astype(np.float64)}}

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        for e, seed in zip(env_ids, seeds):
            self.t[e] = 0
            self.executed[e] = []
            self.ends[e] = self.config.lengths.get(int(seed), -1)
        return self._obs()

    def step(self, actions: np.ndarray):
        actions = self.check_actions(actions, 1)
        for e in range(self.num_envs):
            self.executed[e].append(float(actions[e, 0]))
        self.t += 1
        n = self.num_envs
        return self._obs(), np.zeros(n), self.t == self.ends, np.zeros(n, bool), {}


class RowChunkPolicy(PolicyBase):
    """Chunks of ``rows`` rows: row ``r`` of an env's ``k``-th chunk (from 0) is ``100 k + r``.
    ``asked[e]`` lists the observation (step) each of env ``e``'s requests saw."""

    name = "row_chunks"
    Config = PolicyConfig

    def __init__(self, rows: int = 16, latency_s: dict[int, float] | None = None) -> None:
        super().__init__(PolicyConfig())
        self.rows = rows
        self.latency_s = dict(latency_s or {})  # env -> seconds a chunk for it takes
        self.count: dict[int, int] = {}
        self.asked: dict[int, list[int]] = {}

    def reset(self, env_ids=None, seeds=None) -> None:
        for e in env_ids or []:
            self.count[e] = 0
            self.asked[e] = []

    def get_action_chunk(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        thinking = max((self.latency_s.get(e, 0.0) for e in range(env.num_envs) if self.is_active(e)), default=0.0)
        if thinking:
            time.sleep(thinking)
        out = np.zeros((env.num_envs, self.rows, 1))
        for e in range(env.num_envs):
            if self.is_active(e):
                k = self.count.get(e, 0)
                self.asked.setdefault(e, []).append(int(observation["policy"]["t"][e, 0]))
                out[e, :, 0] = 100 * k + np.arange(self.rows)
                self.count[e] = k + 1
        return out


class TiledExpert:
    """Meta-World's expert served with chunks: its action repeated ``rows`` times (a policy that
    replans once per chunk), optionally after thinking ``delay_s`` seconds."""

    def __init__(self, rows: int = 16, delay_s: float = 0.0) -> None:
        from arena.models.metaworld_expert import MetaWorldExpertModel

        self.model = MetaWorldExpertModel()
        self.rows, self.delay_s = rows, delay_s

    def metadata(self):
        return self.model.metadata()

    def load(self) -> None:
        self.model.load()

    def infer(self, obs):
        import time

        if self.delay_s:
            time.sleep(self.delay_s)
        action = np.asarray(self.model.infer(obs)["actions"])[:1]
        return {"actions": np.repeat(action, self.rows, axis=0)}


def live_records(num_envs: int, inner: PolicyBase, execution: dict[str, Any], seeds: list[int], *,
                 max_steps: int, lengths: dict[int, int] | None = None, control_hz: float = 10.0,
                 trajectories: Any = None, stay: bool = False, executed: dict[int, list[float]] | None = None,
                 ) -> dict[int, Any]:
    """The records (``{seed: EpisodeRecord}``) of arena's real rollout driving ``inner`` live on
    ``num_envs`` counters, one episode per seed in order (``lengths``: seeds that terminate early;
    ``trajectories``: a directory to record each episode's trajectory file in; ``stay``: the
    counters declare a stay action; ``executed``: filled with each env's last episode's actions)."""
    from arena.live.config import ExecutionConfig
    from arena.live.policy import LivePolicy
    from arena.rollout.rollout import rollout
    from arena.rollout.workitems import WorkItem

    class Env(CounterEnv):
        pass

    Env.control_hz = control_hz
    env = Env(CounterConfig(lengths=lengths or {}, stay=stay), num_envs=num_envs)
    config = ExecutionConfig(mode="live", **execution)
    live = LivePolicy(inner, config, hold=config.resolve_hold(Env, env.config), control_hz=control_hz)
    records: list[Any] = []
    limit = SimpleNamespace(num_episodes=len(seeds), max_episode_steps=max_steps, terminate_on_success=True)
    recorder = None
    if trajectories is not None:
        from arena.config import TrajectoriesConfig
        from arena.rollout.trajectories import TrajectoryRecorder

        recorder = TrajectoryRecorder(TrajectoriesConfig(enabled=True), trajectories, run="run", task="count")
    try:
        rollout(env, live, [WorkItem("run", i, s) for i, s in enumerate(seeds)], limit,
                on_episode_end=records.append, max_consecutive_errors=None, trajectories=recorder)
    finally:
        live.close()
    if executed is not None:  # what each env executed in its last episode
        executed.update({e: list(env.executed[e]) for e in range(num_envs)})
    return {r.seed: r for r in records}
