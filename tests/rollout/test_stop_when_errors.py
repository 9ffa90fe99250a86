"""Error episodes do not switch ``stop_when`` off: the rule skips them (they stay excluded) and
decides on the counted episodes as a fault-free run of those outcomes would, whatever seeds
the errors fall on and however the envs are laid out (num_envs, workers, `arena run`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rollout_fakes import RolloutTestPlugin, expected_outcome

from arena.outputs.records import read_records
from arena.outputs.stopping import SeedOrderStop
from arena.plugins import PluginManager
from arena.results.aggregate import build_experiment_result
from arena.rollout.run_one import run_one

RULE = {"threshold": 0.7}
EPISODES = 120
FAKES = Path(__file__).resolve().parent
ROOT = FAKES.parents[1]


def _reference(faults: set[int]) -> SeedOrderStop:
    """The decision from the outcomes alone, errors where they fell; and the fault-free one."""
    stop = SeedOrderStop(RULE, range(EPISODES))
    stop.feed({i: "error" if i in faults else expected_outcome(i) for i in range(EPISODES)})
    return stop


def _experiment(num_envs: int, workers: int, faults: set[int], prefix: str = "") -> dict:
    return {"runs": {"count": {
        "environment": {"type": f"{prefix}counter", "task": "count-up", "fault_seeds": sorted(faults), "workers": workers},
        "policy": {"type": f"{prefix}coin_flip"},
        "environment_builder": {"num_envs": num_envs, "seed": 0},
        "rollout_limit": {"num_episodes": EPISODES, "stop_when": RULE},
    }}}


def _check(out: Path, faults: set[int]) -> None:
    result = json.loads((out / "count" / "run_result.json").read_text())
    want = _reference(faults).decision
    stop = result["stop"]
    assert stop is not None, "an error episode switched the rule off"
    assert result["state"] == "completed"
    assert (stop["episodes_used"], stop["episodes_counted"], stop["decision"], stop["successes"]) == (
        want.episodes, want.counted, want.kind, want.successes)
    assert stop["sequence_ci"] == list(want.sequence_ci) and stop["error_episodes"] == sorted(faults)
    # the rule decided on the counted episodes as a run without those faults would on the same outcomes
    fault_free = SeedOrderStop(RULE, range(want.counted))
    counted = [expected_outcome(i) for i in range(want.episodes) if i not in faults]
    fault_free.feed(dict(enumerate(counted)))
    assert fault_free.decision is not None and fault_free.decision.kind == stop["decision"]
    assert list(fault_free.decision.sequence_ci) == stop["sequence_ci"]
    # the savings are kept: only what was running at the stop ran past it
    records, _ = read_records(out / "count" / "episodes.jsonl")
    assert len(records) < stop["episodes_used"] + 8 < EPISODES
    assert result["counts"]["error"] == len(faults) and sum(result["counts"].values()) == stop["episodes_used"]
    summary = build_experiment_result(out)["runs"]["count"]
    assert summary["n"] == want.counted and summary["errors"] == len(faults)  # errors excluded, reported


@pytest.mark.parametrize("num_envs,workers,faults", [(1, 0, {2}), (4, 0, {5, 17}), (3, 2, {0, 9, 30})])
def test_error_episodes_on_any_seed_and_layout_leave_the_rule_deciding_on_the_counted_ones(
    tmp_path, monkeypatch, num_envs, workers, faults
):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]))  # workers
    manager = PluginManager()
    manager.register(RolloutTestPlugin(), "rollout-test")
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(yaml.safe_dump(_experiment(num_envs, workers, faults)))
    out = tmp_path / "out"
    assert run_one(snapshot, "count", out, manager=manager) == 3  # error episodes: exit 3, as documented
    _check(out, faults)


def test_arena_run_with_workers_stops_early_despite_an_error_episode(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"launch": {"backend": "local"}, **_experiment(4, 2, {3, 11}, "rollout_fakes:")}))
    path.write_text(path.read_text().replace("rollout_fakes:counter", "rollout_fakes:CounterEnv").replace(
        "rollout_fakes:coin_flip", "rollout_fakes:CoinFlipPolicy"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), "--allow-import", "rollout_fakes"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]  # 3: it has error episodes
    _check(out, {3, 11})
