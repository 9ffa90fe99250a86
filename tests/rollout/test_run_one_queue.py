"""``arena run-one --queue``: runners sharing a run claim its episodes from the work queue.

Two real runner processes on one run; one is killed with SIGKILL mid-episode: its leased
episode lapses and the other runner records it, every episode once, and the killed runner's
work directory ends ``completed`` because the records say so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from arena.config import load_experiment
from arena.outputs.layout import QUEUE_FILE
from arena.outputs.records import read_records
from arena.outputs.workqueue import WorkQueue
from arena.rollout.workitems import plan_work_items, write_manifest

FAKES = Path(__file__).resolve().parent
EPISODES = 8


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    out.mkdir()
    snapshot = out / "experiment.yaml"
    snapshot.write_text(yaml.safe_dump({"runs": {"count": {
        "environment": {"type": "rollout_fakes:CounterEnv", "step_delay_s": 0.05},
        "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
        "environment_builder": {"num_envs": 1, "seed": 0},
        "rollout_limit": {"num_episodes": EPISODES},
    }}}))
    experiment = load_experiment(snapshot, allow_imports=["rollout_fakes"])
    write_manifest(experiment, out)
    WorkQueue(out / QUEUE_FILE).load("count", [(i.episode_index, i.seed) for i in plan_work_items(experiment.runs["count"])])
    return out, snapshot


def _runner(out: Path, snapshot: Path, k: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
           "ARENA_ALLOW_IMPORTS": "rollout_fakes", "ARENA_QUEUE_LEASE_S": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "arena", "run-one", str(snapshot), "--run", "count", "--output-dir", str(out),
         "--shard", f"{k}/2", "--queue"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _status(out: Path, k: int) -> dict:
    path = out / "count" / "shards" / str(k) / "status.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def test_a_runner_killed_mid_episode_leaves_its_episode_to_the_other_and_each_is_recorded_once(tmp_path):
    out, snapshot = _setup(tmp_path)
    doomed = _runner(out, snapshot, 0)
    try:
        deadline = time.monotonic() + 60
        while _status(out, 0).get("episodes_done", 0) < 1:  # it works, and holds its next episode's lease
            assert doomed.poll() is None and time.monotonic() < deadline, doomed.stdout.read() if doomed.poll() else "slow"
            time.sleep(0.05)
        survivor = _runner(out, snapshot, 1)
        time.sleep(0.3)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait()
        output, _ = survivor.communicate(timeout=120)
    finally:
        for proc in (doomed,):
            if proc.poll() is None:
                proc.kill()
    assert survivor.returncode == 0, output
    claims = WorkQueue(out / QUEUE_FILE).claims("count")
    assert max(claims.values()) == 2, claims  # the episode it held was claimed once more
    per_dir = [read_records(out / "count" / "shards" / str(k) / "episodes.jsonl")[0] for k in (0, 1)]
    indices = sorted(r.episode_index for records in per_dir for r in records)
    assert indices == list(range(EPISODES))  # none lost, none twice
    assert per_dir[0] and per_dir[1]
    for k in (0, 1):  # the killed runner's directory follows the records
        status = _status(out, k)
        assert status["state"] == "completed", status
        assert status["episodes_total"] == len(per_dir[k])


def test_a_runner_told_to_claim_from_a_queue_nobody_loaded_fails_and_says_so(tmp_path):
    from rollout_fakes import RolloutTestPlugin

    from arena.plugins import PluginManager
    from arena.rollout.run_one import run_one

    pm = PluginManager()
    pm.register(RolloutTestPlugin(), "rollout-test")
    snapshot = tmp_path / "exp.yaml"
    snapshot.write_text(yaml.safe_dump({"runs": {"count": {
        "environment": {"type": "counter"}, "policy": {"type": "coin_flip"}, "rollout_limit": {"num_episodes": 2},
    }}}))
    out = tmp_path / "out"
    assert run_one(snapshot, "count", out, queue=True, manager=pm) == 3
    result = json.loads((out / "count" / "run_result.json").read_text())
    assert result["state"] == "failed" and "holds no episode of run count" in result["error"]
    assert result["episodes"] == 0
