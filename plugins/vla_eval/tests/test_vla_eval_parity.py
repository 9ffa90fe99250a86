"""arena's EPISODE_START equals the one vla-eval's own benchmark client sends for the same task
and episode, for each benchmark arena shares with vla-eval 0.8.0.

Shared benchmarks: LIBERO only. vla-eval 0.8.0 ships no Meta-World or ALOHA benchmark
(``vla_eval/benchmarks/``: behavior1k, calvin, duobench, kinetix, libero*, maniskill2, mikasa,
molmospaces, rlbench, robocasa*, robocerebra, robodojo, robomme, robotwin, simpler, vlabench), so
arena's ``metaworld`` and ``aloha`` adapters keep ``{"name", "seed"}``; arena has no vla-eval
adapter for Kinetix.

vla-eval's side runs its own code: ``LIBEROBenchmark.get_tasks`` (with LIBERO's task suite,
which needs the LIBERO simulator, replaced by the same tasks from arena's catalog), the
orchestrator's ``episode_idx`` rule, and ``SyncEpisodeRunner.run_episode`` with a connection
that records what it is asked to send. arena's side is the real policy talking to vla-eval's
real server, whose model records the EPISODE_START payload it received.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("vla_eval")
pytest.importorskip("arena_libero", reason="the LIBERO environment's config and catalog (arena-plugin-libero)")

from arena_vla_eval.policy import VlaEvalRemoteConfig, VlaEvalRemotePolicy  # noqa: E402

pytestmark = pytest.mark.timeout(60)

SUITE, TASK, EPISODE = "libero_spatial", 3, 7


def _vla_eval_episode_start(suite: str, task_id: int, episode: int) -> dict[str, Any]:
    """The EPISODE_START payload vla-eval 0.8.0's LIBERO client sends for episode ``episode``."""
    from vla_eval.benchmarks.libero.benchmark import LIBEROBenchmark
    from vla_eval.runners.sync_runner import SyncEpisodeRunner

    from arena_libero import catalog

    class NoSimulator(LIBEROBenchmark):
        """vla-eval's LIBERO benchmark without its simulator (the task list is its own code)."""

        async def start_episode(self, task, recorder=None):
            pass

        async def get_observation(self):
            return {}

        async def apply_action(self, action):
            pass

        async def is_done(self):
            return True

        async def get_time(self):
            return 0.0

        async def get_result(self):
            return {"success": False}

    class Recorder:
        def __init__(self) -> None:
            self.sent: list[tuple[str, dict[str, Any]]] = []

        async def start_episode(self, config):
            self.sent.append(("episode_start", config))

        async def act(self, obs):
            return {"actions": np.zeros(7, np.float32)}

        async def end_episode(self, result):
            self.sent.append(("episode_end", result))

    tasks = catalog.tasks(suite)
    bench = NoSimulator(suite=suite)
    bench._task_suite = SimpleNamespace(  # LIBERO's suite object: n_tasks, get_task(i).language
        n_tasks=len(tasks), get_task=lambda i: SimpleNamespace(language=tasks[i].language)
    )
    task = bench.get_tasks()[task_id]
    task = {**task, "episode_idx": episode}  # orchestrator.py l.429-434 (not throughput mode)
    conn = Recorder()
    asyncio.run(SyncEpisodeRunner().run_episode(bench, task, conn, max_steps=1))
    return conn.sent[0][1]


class _LiberoEnv:
    """What the policy reads of arena's LIBERO env: its config and the episode's init state."""

    def __init__(self, init_state: int) -> None:
        from arena_libero.env import LiberoConfig

        self.num_envs = 1
        self.config = LiberoConfig(suite=SUITE, task=TASK)
        self.task_description = self.config.selected_task().language
        self._init_state = init_state

    def episode_info(self, env_id: int) -> dict[str, Any]:
        return {"init_state": self._init_state, "seeding": "reference"}


def test_libero_episode_start_equals_vla_evals_libero_client(serve_dummy):
    expected = _vla_eval_episode_start(SUITE, TASK, EPISODE)
    env = _LiberoEnv(init_state=EPISODE)  # arena's LIBERO: seed 57 starts from init state 57 mod 50
    with serve_dummy(action_dim=7, send_state=False) as (model, port):
        policy = VlaEvalRemotePolicy(VlaEvalRemoteConfig(remote_port=port, embodiment="libero", connect_timeout_s=20))
        policy.start(env)
        try:
            policy.set_task_description(env.task_description)
            policy.reset([0], [57])
            deadline = time.monotonic() + 10
            while not model.episode_starts and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            policy.close()
    assert expected == {
        "task": {"name": "pick up the black bowl on the cookie box and place it on the plate", "suite": SUITE,
                 "task_id": TASK, "episode_idx": EPISODE}
    }
    assert model.episode_starts == [expected]


def test_metaworld_episode_start_keeps_name_and_seed_as_vla_eval_has_no_metaworld(serve_dummy):
    import vla_eval.benchmarks as benchmarks
    from importlib.resources import files

    assert not any(p.name in ("metaworld", "meta_world", "aloha") for p in files(benchmarks).iterdir())
    env = SimpleNamespace(num_envs=1, config=None, episode_info=lambda env_id: {})
    with serve_dummy() as (model, port):
        policy = VlaEvalRemotePolicy(VlaEvalRemoteConfig(remote_port=port, embodiment="metaworld", connect_timeout_s=20))
        policy.start(env)
        try:
            policy.set_task_description("Reach the goal.")
            policy.reset([0], [5])
            deadline = time.monotonic() + 10
            while not model.episode_starts and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            policy.close()
    assert model.episode_starts == [{"task": {"name": "Reach the goal.", "seed": 5}}]
