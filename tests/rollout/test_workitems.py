from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from rollout_fakes import CoinFlipConfig, CounterConfig

from arena.rollout.workitems import WorkItem, parse_shard, plan_work_items, select_shard, write_manifest


def _run(name="pick", num_episodes=5, seed=100, num_envs=2):
    return SimpleNamespace(
        name=name,
        environment_type="counter",
        environment=CounterConfig(task="t1"),
        policy_type="coin_flip",
        policy=CoinFlipConfig(),
        environment_builder=SimpleNamespace(num_envs=num_envs, seed=seed),
        rollout_limit=SimpleNamespace(num_episodes=num_episodes, max_episode_steps=None, terminate_on_success=True),
    )


def test_episode_i_gets_seed_plus_i():
    assert plan_work_items(_run()) == [WorkItem("pick", i, 100 + i) for i in range(5)]


def test_shards_partition_the_items_by_index_mod_n():
    items = plan_work_items(_run(num_episodes=10))
    shards = [select_shard(items, k, 3) for k in range(3)]
    assert [i.episode_index for i in shards[1]] == [1, 4, 7]
    assert sorted(i for s in shards for i in s) == sorted(items)


@pytest.mark.parametrize("k,n", [(3, 3), (-1, 2), (0, 0)])
def test_invalid_shard_is_refused(k, n):
    with pytest.raises(ValueError, match="0 <= K < N"):
        select_shard([], k, n)


def test_parse_shard_reads_k_slash_n():
    assert parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "a/b", "1"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def test_manifest_lists_every_runs_work_items(tmp_path):
    experiment = SimpleNamespace(name="exp", runs={"a": _run("a", 2, 0, 1), "b": _run("b", 3, 7, 4)})
    path = write_manifest(experiment, tmp_path)
    data = json.loads(path.read_text())
    assert data["experiment"] == "exp" and list(data["runs"]) == ["a", "b"]
    b = data["runs"]["b"]
    assert b["num_envs"] == 4 and b["task"] == "t1" and b["policy"] == {"type": "coin_flip", "variant": "fair"}
    assert b["work_items"] == [{"run": "b", "episode_index": i, "seed": 7 + i} for i in range(3)]
