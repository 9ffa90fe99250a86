"""Tiny deterministic env and policies for rollout tests (no simulator).

CounterEnv: each env holds a counter; an action adds ``round(action[0])``. Episode seed ``s``
sets the target ``2 + s % 5``; reaching it is success. Seeds with ``s % 7 == 3`` make the
simulator terminate the episode (a failure) after 2 steps. Reward is the action.

CoinFlipPolicy: per env, a generator seeded from the episode seed draws 0 or 1 each step, so an
episode's outcome depends only on its seed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import Field

from arena.envs.base import Environment, EnvironmentConfig
from arena.errors import PolicyError, SimulatorError
from arena.hookspecs import hookimpl
from arena.policies.base import PolicyBase, PolicyConfig


class CounterConfig(EnvironmentConfig):
    task: str = "count-to-target"
    max_steps: int = Field(6, ge=1)
    #: seconds every step sleeps (to make a run last long enough to be interrupted)
    step_delay_s: float = Field(0.0, ge=0)
    #: while this file exists, every step after the env's first ``hold_after_resets`` resets
    #: waits (a run held mid-way, deterministically, until a test removes the file)
    hold_file: str | None = None
    hold_after_resets: int = Field(1, ge=0)
    #: episode seeds whose second step fails in ``info["env_errors"]`` (as a dead worker's envs)
    fault_seeds: list[int] = Field(default_factory=list)
    #: episode seeds whose reset fails with a SimulatorError naming that env (the others reset)
    reset_fault_seeds: list[int] = Field(default_factory=list)


class CounterEnv(Environment):
    name = "counter"
    Config = CounterConfig
    success_key = "success"

    instances: list[CounterEnv] = []

    def __init__(self, config: CounterConfig, *, num_envs: int, cameras: bool = False) -> None:
        super().__init__(config, num_envs=num_envs, cameras=cameras)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.task_description = "count up to the target"
        self.default_max_episode_steps = config.max_steps
        self.counter = np.zeros(num_envs)
        self.target = np.full(num_envs, 10**9)
        self.seed = np.full(num_envs, -1)
        self.steps = np.zeros(num_envs, dtype=int)
        self.closed = False
        self.resets: list[tuple[list[int], list[int]]] = []
        self.renders: list[int] = []
        CounterEnv.instances.append(self)

    def _obs(self) -> dict[str, Any]:
        return {"policy": {"counter": self.counter[:, None].astype(np.float32)}}

    def reset_envs(self, env_ids: list[int], seeds: list[int]) -> dict[str, Any]:
        self.resets.append((list(env_ids), list(seeds)))
        lost = [e for e, s in zip(env_ids, seeds) if s in self.config.reset_fault_seeds]
        for e, s in zip(env_ids, seeds):
            if e in lost:
                self.seed[e] = -1
                continue
            self.counter[e] = 0
            self.steps[e] = 0
            self.seed[e] = s
            self.target[e] = 2 + s % 5
        if lost:
            raise SimulatorError(f"worker of envs {lost} died", lost, observation=self._obs())
        return self._obs()

    def step(self, actions: np.ndarray):
        assert actions.shape == (self.num_envs, 1) and actions.dtype == np.float32
        if self.config.step_delay_s:
            import time

            time.sleep(self.config.step_delay_s)
        if self.config.hold_file and len(self.resets) > self.config.hold_after_resets:
            import time

            while os.path.exists(self.config.hold_file):
                time.sleep(0.05)
        inc = np.round(actions[:, 0])
        self.counter += inc
        self.steps += 1
        success = self.counter >= self.target
        terminated = (self.seed % 7 == 3) & (self.steps >= 2) & ~success
        truncated = np.zeros(self.num_envs, dtype=bool)
        info: dict[str, Any] = {"success": success}
        faults = {int(e): f"worker of env {e} died (signal 9)" for e in range(self.num_envs)
                  if self.seed[e] in self.config.fault_seeds and self.steps[e] == 2}
        if faults:
            info["env_errors"] = faults
        return self._obs(), inc.astype(np.float64), terminated, truncated, info

    def episode_info(self, env_id: int) -> dict[str, Any]:
        return {"target": int(self.target[env_id])}

    def render(self, env_id: int) -> np.ndarray:
        """A 10x12 frame whose brightness is the env's counter; every call is logged."""
        self.renders.append(int(env_id))
        return np.full((10, 12, 3), min(255, 40 * int(self.counter[env_id])), np.uint8)

    def close(self) -> None:
        self.closed = True


class CoinFlipConfig(PolicyConfig):
    policy_variant: str | None = "fair"
    #: episode seeds whose first request fails with a PolicyError naming only that env
    error_seeds: list[int] = Field(default_factory=list)
    #: with it, an episode seed of ``error_seeds`` fails only the first time (a marker file
    #: ``error-<seed>`` in this folder says it did): an error a resume can fix
    error_once_dir: str | None = None
    #: every request fails for every env
    always_fail: bool = False
    #: the constructor raises (e.g. the server is unreachable)
    fail_to_build: bool = False


class CoinFlipPolicy(PolicyBase[CoinFlipConfig]):
    name = "coin_flip"
    Config = CoinFlipConfig
    closed_count = 0

    def __init__(self, config: CoinFlipConfig) -> None:
        if config.fail_to_build:
            raise ConnectionRefusedError("policy server at 127.0.0.1:1 refused the connection")
        super().__init__(config)
        self.rngs: dict[int, np.random.Generator] = {}
        self.seeds: dict[int, int] = {}
        self.fresh: set[int] = set()
        self.requests: dict[int, int] = {}
        self.started = False

    def start(self, env) -> None:
        self.started = True

    def reset(self, env_ids=None, seeds=None) -> None:
        for e, s in zip(env_ids, seeds):
            self.rngs[e] = np.random.default_rng(s)
            self.seeds[e] = s
            self.fresh.add(e)
            self.requests[e] = 0

    def get_action(self, env, observation) -> np.ndarray:
        if self.config.always_fail:
            raise PolicyError("policy server closed the connection", None)
        bad = [e for e in self.fresh if self.seeds.get(e) in self.config.error_seeds]
        if bad and self.config.error_once_dir is not None:
            markers = {e: Path(self.config.error_once_dir) / f"error-{self.seeds[e]}" for e in bad}
            bad = [e for e in bad if not markers[e].exists()]
            for e in bad:
                markers[e].touch()
        if bad:
            self.fresh -= set(bad)
            raise PolicyError(f"request timed out for envs {sorted(bad)}", sorted(bad))
        self.fresh.clear()
        actions = np.zeros((env.num_envs, 1), dtype=np.float32)
        for e in range(env.num_envs):
            if e in self.rngs:
                actions[e, 0] = float(self.rngs[e].integers(0, 2))
                self.requests[e] += 1
        return actions

    def episode_info(self, env_id: int) -> dict[str, Any]:
        n = self.requests.get(env_id, 0)
        return {"latency": {"requests": n, "mean_ms": 1.0, "p50_ms": 1.0, "p95_ms": 1.0, "max_ms": 1.0} if n else None}

    def close(self) -> None:
        CoinFlipPolicy.closed_count += 1


class FakeRemoteConfig(CoinFlipConfig):
    remote_host: str = "127.0.0.1"
    remote_port: int = 8000


class FakeRemotePolicy(CoinFlipPolicy):
    name = "fake_remote"
    Config = FakeRemoteConfig
    endpoints: list[tuple[str, int]] = []

    def __init__(self, config: FakeRemoteConfig) -> None:
        super().__init__(config)
        FakeRemotePolicy.endpoints.append((config.remote_host, config.remote_port))

    @property
    def is_remote(self) -> bool:
        return True


class HangOnceConfig(CoinFlipConfig):
    #: episode seed whose first step hangs forever, once: a marker file in ``marker_dir`` says it did
    hang_seed: int = 3
    marker_dir: str = "."


class HangOncePolicy(CoinFlipPolicy):
    """CoinFlipPolicy that wedges (sleeps forever) on ``hang_seed`` the first time it sees it."""

    name = "hang_once"
    Config = HangOnceConfig

    def get_action(self, env, observation) -> np.ndarray:
        import os
        import time

        if self.config.hang_seed in self.seeds.values():
            marker = os.path.join(self.config.marker_dir, "hung-once")
            if not os.path.exists(marker):
                open(marker, "w").close()
                while True:
                    time.sleep(1)
        return super().get_action(env, observation)


class _NoBackend:
    """Stands in for the local launch backend so the loader validates ``launch``."""


class RolloutTestPlugin:
    @hookimpl
    def arena_register_environments(self, register):
        register("counter", CounterEnv)

    @hookimpl
    def arena_register_policies(self, register):
        register("coin_flip", CoinFlipPolicy)
        register("fake_remote", FakeRemotePolicy)

    @hookimpl
    def arena_register_launch_backends(self, register):
        register("local", _NoBackend)


def expected_outcome(seed: int, max_steps: int = 6) -> str:
    """The outcome CounterEnv + CoinFlipPolicy give an episode of ``seed`` (terminate_on_success)."""
    rng = np.random.default_rng(seed)
    counter, target = 0, 2 + seed % 5
    for step in range(1, max_steps + 1):
        counter += int(rng.integers(0, 2))
        if counter >= target:
            return "success"
        if seed % 7 == 3 and step >= 2:
            return "failure"
    return "timeout"


#: This folder: ``arena`` subprocesses import the fakes from it (``rollout_fakes:CounterEnv``).
FAKES_DIR = Path(__file__).resolve().parent


def fakes_env() -> dict[str, str]:
    """This process's environment with :data:`FAKES_DIR` first on ``PYTHONPATH``, for an
    ``arena`` subprocess whose runs name these fakes."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES_DIR), os.environ.get("PYTHONPATH", "")])}


def count_lines(path: Path) -> int:
    """Lines written to ``path`` so far (0 while it does not exist): a running run's records."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0
