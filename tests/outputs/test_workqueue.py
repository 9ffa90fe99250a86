"""The work queue (arena.outputs.workqueue): leases, lapses, one finish per item, under
interleavings (hypothesis) and with real processes, one of them killed mid-episode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.outputs.workqueue import LeaseKeeper, WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def queue(tmp_path):
    clock = Clock()
    q = WorkQueue(tmp_path / "queue.sqlite", clock=clock)
    q.load("a", [(i, 100 + i) for i in range(3)])
    return q, clock


def test_items_are_claimed_in_index_order_until_none_is_left(queue):
    q, _ = queue
    leases = [q.claim("r1", 10) for _ in range(3)]
    assert [(le.episode_index, le.seed, le.claim) for le in leases] == [(0, 100, 1), (1, 101, 1), (2, 102, 1)]
    assert q.claim("r2", 10) is None
    assert q.counts("a") == {"queued": 0, "leased": 3, "lapsed": 0, "done": 0}
    assert q.outstanding(["a"]) == 3


def test_a_lapsed_lease_goes_to_exactly_one_new_claimer_and_the_old_holder_cannot_renew(queue):
    q, clock = queue
    first = q.claim("dead", 10)
    clock.now += 5
    assert q.renew(first, 10)  # renewed in time: not claimable
    clock.now += 9
    assert q.claim("r2", 10).episode_index == 1
    clock.now += 2  # past the renewed lease
    assert q.counts("a")["lapsed"] == 1
    again = q.claim("r2", 10)
    assert (again.episode_index, again.claim) == (0, 2)
    assert q.claim("r3", 10).episode_index == 2  # item 0 is not handed out a third time
    assert q.claim("r3", 10) is None
    assert not q.renew(first, 10)
    assert q.claims("a") == {0: 2, 1: 1, 2: 1}


def test_a_duplicate_finish_is_dropped_and_the_first_record_kept(queue):
    q, clock = queue
    slow = q.claim("slow", 10)
    clock.now += 11
    fast = q.claim("fast", 10)
    assert fast.episode_index == slow.episode_index == 0
    assert q.finish(fast, '{"by": "fast"}')
    assert not q.finish(slow, '{"by": "slow"}')  # its episode ended too late: not counted
    assert not q.finish(fast, '{"by": "fast again"}')
    assert q.records("a") == {0: '{"by": "fast"}'}


def test_a_released_item_is_claimed_again_and_load_replaces_a_runs_items(queue):
    q, _ = queue
    lease = q.claim("r1", 10)
    assert q.release(lease)
    assert not q.release(lease)
    assert q.claim("r2", 10).episode_index == 0
    q.load("a", [(2, 102)])  # a resume: only item 2 is left
    q.load("b", [(0, 7)])
    assert q.counts("a") == {"queued": 1, "leased": 0, "lapsed": 0, "done": 0}
    assert q.claim("r1", 10, runs=["b"]).seed == 7
    assert q.claim("r1", 10, runs=[]) is None
    with pytest.raises(ValueError, match="lease_s"):
        q.claim("r1", 0)


def test_the_lease_keeper_renews_until_dropped(tmp_path):
    q = WorkQueue(tmp_path / "q.sqlite")
    q.load("a", [(0, 0)])
    keeper = LeaseKeeper(q, lease_s=0.3)
    lease = q.claim("r1", 0.3)
    keeper.hold(lease)
    time.sleep(0.8)  # more than two lease lengths: renewed meanwhile
    assert q.claim("r2", 0.3) is None
    keeper.drop(lease)
    time.sleep(0.4)
    assert q.claim("r2", 0.3).claim == 2
    time.sleep(0.1)
    keeper.close()


# -- any interleaving of runners: every item finished exactly once ------------------------------
_ACTIONS = st.lists(
    st.tuples(st.sampled_from(["claim", "renew", "finish", "release", "crash", "tick"]), st.integers(0, 2)),
    max_size=60,
)


@pytest.fixture(scope="module")
def fast_dir():
    """Memory-backed where the machine has one: the examples are many short transactions,
    whose fsyncs would dominate on a disk."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="arena-queue-", dir=base) as d:
        yield Path(d)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=_ACTIONS, n_items=st.integers(1, 5))
def test_any_interleaving_records_every_item_exactly_once(fast_dir, actions, n_items):
    clock = Clock()
    path = fast_dir / "queue.sqlite"
    path.unlink(missing_ok=True)
    q = WorkQueue(path, clock=clock)
    q.load("run", [(i, i) for i in range(n_items)])
    held: dict[int, list] = {r: [] for r in range(3)}  # runner -> leases it believes it holds
    won: list[int] = []
    for action, r in actions:
        if action == "claim":
            lease = q.claim(f"r{r}", 10)
            if lease is not None:
                held[r].append(lease)
        elif action == "renew" and held[r]:
            q.renew(held[r][0], 10)
        elif action == "finish" and held[r]:
            lease = held[r].pop(0)
            if q.finish(lease, json.dumps({"i": lease.episode_index, "by": r})):
                won.append(lease.episode_index)
        elif action == "release" and held[r]:
            q.release(held[r].pop(0))
        elif action == "crash":
            held[r] = []  # its leases just lapse
        elif action == "tick":
            clock.now += 6
        # invariant at every step: nothing finished twice; a live lease is held by one claim
        assert len(won) == len(set(won))
    # drain: a fresh runner finishes what is left once the lapsed leases return
    clock.now += 11
    while (lease := q.claim("drain", 10)) is not None:
        assert q.finish(lease, json.dumps({"i": lease.episode_index, "by": "drain"}))
        won.append(lease.episode_index)
    for leases in held.values():  # the survivors' late finishes are all duplicates now
        for lease in leases:
            assert not q.finish(lease, "{}")
    assert sorted(won) == list(range(n_items))
    assert sorted(q.records("run")) == list(range(n_items))
    assert q.outstanding() == 0


# -- real processes: a runner killed mid-episode ----------------------------------------------
_RUNNER = textwrap.dedent(
    """
    import json, os, sys, time
    from arena.outputs.workqueue import LeaseKeeper, WorkQueue
    path, owner, records, episode_s = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    queue = WorkQueue(path)
    keeper = LeaseKeeper(queue, lease_s=1.0)
    with open(records, "a") as out:
        while queue.outstanding() > 0:
            lease = queue.claim(owner, 1.0)
            if lease is None:
                time.sleep(0.05)
                continue
            keeper.hold(lease)
            with open(records + ".started", "a") as started:
                started.write(f"{lease.episode_index}\\n")
            time.sleep(episode_s)  # the episode
            line = json.dumps({"episode_index": lease.episode_index, "seed": lease.seed, "by": owner})
            if queue.finish(lease, line):
                out.write(line + "\\n")
                out.flush()
            keeper.drop(lease)
    keeper.close()
    """
)


def test_a_runner_killed_mid_episode_has_its_episode_rerun_once(tmp_path):
    q = WorkQueue(tmp_path / "queue.sqlite")
    q.load("run", [(i, 50 + i) for i in range(8)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def start(name: str, episode_s: float) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", _RUNNER, str(tmp_path / "queue.sqlite"), name, str(tmp_path / f"{name}.jsonl"),
             str(episode_s)], env=env,
        )

    doomed = start("doomed", 30.0)  # its first episode would take 30 s: it dies in it
    started = tmp_path / "doomed.jsonl.started"
    deadline = time.monotonic() + 30
    while not (started.exists() and started.read_text().strip()):
        assert time.monotonic() < deadline, "the doomed runner never claimed an episode"
        time.sleep(0.05)
    victim = int(started.read_text().split()[0])
    survivor = start("survivor", 0.05)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    assert survivor.wait(timeout=60) == 0
    lines = [json.loads(line) for line in (tmp_path / "survivor.jsonl").read_text().splitlines()]
    assert not (tmp_path / "doomed.jsonl").read_text()
    assert sorted(r["episode_index"] for r in lines) == list(range(8))  # every item once, none twice
    assert {r["seed"] for r in lines} == set(range(50, 58))
    claims = q.claims("run")
    assert claims[victim] == 2 and all(c == 1 for i, c in claims.items() if i != victim)
    assert q.counts() == {"queued": 0, "leased": 0, "lapsed": 0, "done": 8}
