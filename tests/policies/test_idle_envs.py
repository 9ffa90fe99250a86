"""Only envs running an episode ask the server; idle envs repeat their last applied action.

The example of issue 17: after the work queue emptied, envs with no episode kept requesting
chunks: 392 inferences for 263 episode steps (5 episodes, num_envs 4, horizon 1).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem
from arena.testing.droid import DroidFakeEnv


def _reply(request):
    """Joint targets one step on from the current ones: every step's action differs."""
    joints = np.asarray(request["observation/joint_position"], np.float64)
    row = np.concatenate([joints + 0.01, [0.5]])
    return {"actions": np.tile(row, (15, 1))}


def _items(n: int) -> list[WorkItem]:
    return [WorkItem(run="r", episode_index=i, seed=i) for i in range(n)]


@pytest.mark.parametrize("horizon", [1, 4])
def test_server_requests_match_the_steps_of_episodes_not_of_idle_envs(openpi_double, horizon):
    from arena_openpi.policy import Pi0RemoteConfig, Pi0RemotePolicy

    double = openpi_double(_reply)
    # seeds 1 and 2 end after 2 steps, the others after 6: envs go idle at different times
    env = DroidFakeEnv(num_envs=4, episode_steps=6, short_seeds=(1, 2), short_steps=2)
    policy = Pi0RemotePolicy(Pi0RemoteConfig(remote_host=double.host, remote_port=double.port, open_loop_horizon=horizon))
    records = []
    try:
        summary = rollout(env, policy, _items(5), None, on_episode_end=records.append)
    finally:
        policy.close()
    assert summary.episodes == 5 and not summary.aborted
    steps = [r.steps for r in records]
    assert sorted(steps) == [2, 2, 6, 6, 6]
    assert len(double.model.requests) == sum(math.ceil(s / horizon) for s in steps)
    assert sum(r.latency["requests"] for r in records) == len(double.model.requests)


def test_an_idle_env_repeats_its_last_applied_action(openpi_double):
    from arena_openpi.policy import Pi0RemoteConfig, Pi0RemotePolicy

    double = openpi_double(_reply)
    env = DroidFakeEnv(num_envs=2, episode_steps=6, short_seeds=(1,), short_steps=2)
    policy = Pi0RemotePolicy(Pi0RemoteConfig(remote_host=double.host, remote_port=double.port, open_loop_horizon=1))
    try:
        rollout(env, policy, _items(2), None, on_episode_end=lambda r: None)
    finally:
        policy.close()
    applied = np.stack(env.actions)  # (steps, num_envs, 8)
    assert applied.shape[0] == 6
    # env 1's episode (seed 1) ended after step 2; from then on it holds that last action
    assert np.all(applied[2:, 1] == applied[1, 1]) and np.any(applied[1, 1] != 0)
    assert len(np.unique(applied[:, 0], axis=0)) == 6  # env 0 kept following its policy


class _CountingModel:
    """The Meta-World expert model, counting the inferences the server ran."""

    def __init__(self, model) -> None:
        self.model = model
        self.inferences = 0
        self.lock = threading.Lock()

    def metadata(self):
        return self.model.metadata()

    def load(self):
        return self.model.load()

    def infer(self, obs):
        with self.lock:
            self.inferences += 1
        return self.model.infer(obs)


@pytest.mark.slow
def test_issue_example_metaworld_expert_five_episodes_four_envs(policy_server):
    from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment
    from arena.plugins import get_registry
    from arena.policies.metaworld_expert import MetaWorldExpertRemoteConfig, MetaWorldExpertRemotePolicy

    model = _CountingModel(get_registry().servers["metaworld-expert"]())
    server = policy_server(model)
    env = MetaWorldEnvironment(MetaWorldConfig(task="reach-v3"), num_envs=4)
    policy = MetaWorldExpertRemotePolicy(MetaWorldExpertRemoteConfig(remote_host=server.host, remote_port=server.port))
    records = []
    limit = type("Limit", (), {"max_episode_steps": 120, "terminate_on_success": True})()
    try:
        rollout(env, policy, _items(5), limit, on_episode_end=records.append)
    finally:
        policy.close()
        env.close()
    assert len(records) == 5
    assert model.inferences == sum(r.steps for r in records)  # horizon 1: one request per episode step


def test_gr00t_chunk_scheduler_never_fetches_for_an_idle_env():
    from arena_gr00t.schedulers import ChunkScheduler, SyncedBatchScheduler

    fetches = []

    def fetch():
        fetches.append(1)
        return np.ones((2, 3, 1), np.float32) * len(fetches)

    for cls in (ChunkScheduler, SyncedBatchScheduler):
        fetches.clear()
        scheduler = cls(num_envs=2, chunk_length=3, action_dim=1)
        scheduler.get_action(fetch, hold_action=np.zeros((2, 1)))  # both envs take chunk 1
        scheduler.reset([1])  # env 1's episode ended; the queue is empty: it stays idle
        scheduler.set_active([0])
        for _ in range(2):
            scheduler.get_action(fetch, hold_action=np.zeros((2, 1)))
        assert len(fetches) == 1, cls.__name__  # env 0 is still replaying its chunk
        scheduler.get_action(fetch, hold_action=np.zeros((2, 1)))
        assert len(fetches) == 2, cls.__name__  # env 0 is due: one batched fetch
        assert scheduler.requests.tolist() == [2, 0]
