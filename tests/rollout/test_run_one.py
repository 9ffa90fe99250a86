from __future__ import annotations

import json
import os
import signal

import pytest
import yaml
from rollout_fakes import CoinFlipPolicy, CounterEnv, FakeRemotePolicy, RolloutTestPlugin, expected_outcome

from arena.plugins import PluginManager
from arena.results.aggregate import build_experiment_result
from arena.outputs.records import read_records
from arena.rollout.run_one import run_one


@pytest.fixture
def manager():
    pm = PluginManager()
    pm.register(RolloutTestPlugin(), "rollout-test")
    return pm


def _snapshot(path, policy=None, num_episodes=8, num_envs=3, seed=0, name="count"):
    data = {
        "runs": {
            name: {
                "environment": {"type": "counter", "task": "count-up"},
                "policy": policy or {"type": "coin_flip"},
                "environment_builder": {"num_envs": num_envs, "seed": seed},
                "rollout_limit": {"num_episodes": num_episodes},
            }
        }
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _read(out, run="count", sub=""):
    base = out / run / sub if sub else out / run
    records, issues = read_records(base / "episodes.jsonl")
    assert issues == []
    return (
        records,
        json.loads((base / "run_result.json").read_text()),
        json.loads((base / "status.json").read_text()),
    )


def test_run_one_writes_records_result_and_status(tmp_path, manager):
    snap = _snapshot(tmp_path / "experiment.yaml", seed=5)
    out = tmp_path / "out"
    assert run_one(snap, "count", out, manager=manager) == 0
    records, result, status = _read(out)
    assert sorted(r.episode_index for r in records) == list(range(8))
    assert all(r.outcome == expected_outcome(r.seed) for r in records)
    assert all(r.task == "count-up" and r.policy == {"type": "coin_flip", "variant": "fair"} for r in records)
    counts = {o: sum(r.outcome == o for r in records) for o in ("success", "failure", "timeout", "error")}
    assert result["counts"] == counts and result["state"] == "completed" and result["error"] is None
    n = 8 - counts["error"]
    assert result["success_rate"] == pytest.approx(counts["success"] / n)
    assert 0 <= result["ci95"][0] <= result["success_rate"] <= result["ci95"][1] <= 1
    assert result["server"] is None and result["shard"] is None and result["episodes"] == 8
    assert result["started_at"] <= result["finished_at"]
    assert status["state"] == "completed" and status["episodes_done"] == 8 and status["episodes_total"] == 8
    assert status["successes"] == counts["success"] and status["last_progress_at"]
    assert CounterEnv.instances[-1].closed


def test_error_episodes_make_exit_code_3_but_the_run_completes(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", policy={"type": "coin_flip", "error_seeds": [1, 4]})
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, _ = _read(tmp_path / "out")
    assert result["state"] == "completed" and result["counts"]["error"] == 2
    assert result["success_rate"] == pytest.approx(result["counts"]["success"] / 6)


def test_persistent_policy_errors_fail_the_run_and_leave_items_for_resume(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", policy={"type": "coin_flip", "always_fail": True}, num_episodes=12)
    closed = CoinFlipPolicy.closed_count
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, status = _read(tmp_path / "out")
    assert result["state"] == "failed" and "consecutive error episodes" in result["error"]
    assert len(records) == 9 and status["state"] == "failed"  # 3 failed calls, each ending the 3 envs' episodes
    assert CoinFlipPolicy.closed_count == closed + 1


def test_unreachable_server_at_construction_fails_the_run(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", policy={"type": "coin_flip", "fail_to_build": True})
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, status = _read(tmp_path / "out")
    assert records == [] and result["state"] == "failed" and "refused the connection" in result["error"]
    assert status["state"] == "failed"
    assert CounterEnv.instances[-1].closed


def test_configuration_errors_exit_2_with_a_message(tmp_path, manager, capsys):
    snap = _snapshot(tmp_path / "e.yaml")
    assert run_one(snap, "nope", tmp_path / "out", manager=manager) == 2
    assert "no run named 'nope'" in capsys.readouterr().err
    bad = _snapshot(tmp_path / "bad.yaml", policy={"type": "coin_flip", "colour": "red"})
    assert run_one(bad, "count", tmp_path / "out", manager=manager) == 2
    assert "colour" in capsys.readouterr().err
    assert run_one(snap, "count", tmp_path / "out", shard=(2, 2), manager=manager) == 2


def test_resume_reruns_only_error_and_missing_episodes(tmp_path, manager):
    out = tmp_path / "out"
    flaky = _snapshot(tmp_path / "flaky.yaml", policy={"type": "coin_flip", "error_seeds": [1, 4]})
    assert run_one(flaky, "count", out, manager=manager) == 3
    # drop episode 6's record and leave a torn line, as if the process died there
    path = out / "count" / "episodes.jsonl"
    lines = [l for l in path.read_text().splitlines() if json.loads(l)["episode_index"] != 6]
    path.write_text("\n".join(lines) + '\n{"run": "count", "epis')
    fixed = _snapshot(tmp_path / "fixed.yaml")
    assert run_one(fixed, "count", out, resume=True, manager=manager) == 0
    env = CounterEnv.instances[-1]
    assert sorted(s for _, seeds in env.resets for s in seeds) == [1, 4, 6]
    records, result, status = _read_tolerant(out)
    assert result["counts"]["error"] == 0 and result["episodes"] == 8 and result["state"] == "completed"
    assert status["episodes_total"] == 8 and status["episodes_done"] == 8


def _read_tolerant(out, run="count"):
    base = out / run
    records, _ = read_records(base / "episodes.jsonl")
    return records, json.loads((base / "run_result.json").read_text()), json.loads((base / "status.json").read_text())


def test_resume_of_a_finished_run_builds_nothing(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=4)
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 0
    before = len(CounterEnv.instances)
    assert run_one(snap, "count", tmp_path / "out", resume=True, manager=manager) == 0
    assert len(CounterEnv.instances) == before


def test_fresh_start_moves_old_records_aside(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=3)
    out = tmp_path / "out"
    assert run_one(snap, "count", out, manager=manager) == 0
    assert run_one(snap, "count", out, manager=manager) == 0
    records, _, _ = _read(out)
    assert len(records) == 3
    assert len(list((out / "count").glob("episodes.jsonl.*.bak"))) == 1


def test_shards_merge_to_the_same_totals_as_one_unsharded_run(tmp_path, manager):
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=11, num_envs=2, seed=3)
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    assert run_one(snap, "count", whole, manager=manager) == 0
    for k in range(3):
        assert run_one(snap, "count", sharded, shard=(k, 3), manager=manager) == 0
    shard1, result1, _ = _read(sharded, sub="shards/1")
    assert [r.episode_index for r in sorted(shard1, key=lambda r: r.episode_index)] == [1, 4, 7, 10]
    assert result1["shard"] == [1, 3]
    a = build_experiment_result(whole)["runs"]["count"]
    b = build_experiment_result(sharded)["runs"]["count"]
    assert a["counts"] == b["counts"] and a["ci95"] == b["ci95"] and b["state"] == "completed"
    assert b["episodes_recorded"] == 11


def test_server_endpoint_comes_from_arguments_or_environment(tmp_path, manager, monkeypatch):
    snap = _snapshot(tmp_path / "e.yaml", policy={"type": "fake_remote"}, num_episodes=2)
    assert run_one(snap, "count", tmp_path / "a", server_host="10.0.0.7", server_port=9001, manager=manager) == 0
    assert FakeRemotePolicy.endpoints[-1] == ("10.0.0.7", 9001)
    assert _read(tmp_path / "a")[1]["server"] == {"host": "10.0.0.7", "port": 9001}

    monkeypatch.setenv("ARENA_SERVER_HOST", "node12")
    monkeypatch.setenv("ARENA_SERVER_PORT", "8123")
    monkeypatch.setenv("ARENA_SERVER_INFO", json.dumps({"task": "fake", "host": "node12", "port": 8123}))
    assert run_one(snap, "count", tmp_path / "b", manager=manager) == 0
    assert FakeRemotePolicy.endpoints[-1] == ("node12", 8123)
    assert _read(tmp_path / "b")[1]["server"] == {"task": "fake", "host": "node12", "port": 8123}


def _signal_at_step_12(monkeypatch, signum: int, before=lambda: None) -> None:
    """The policy's 12th action request sends ``signum`` to this process (after ``before()``),
    as a scheduler or the node supervisor would mid-run."""
    calls = {"n": 0}
    original = CoinFlipPolicy.get_action

    def get_action(self, env, observation):
        calls["n"] += 1
        if calls["n"] == 12:
            before()
            os.kill(os.getpid(), signum)
        return original(self, env, observation)

    monkeypatch.setattr(CoinFlipPolicy, "get_action", get_action)


def test_sigterm_cancels_and_keeps_finished_records(tmp_path, manager, monkeypatch):
    _signal_at_step_12(monkeypatch, signal.SIGTERM)
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=50, num_envs=1)
    before = signal.getsignal(signal.SIGTERM)
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, status = _read(tmp_path / "out")
    assert result["state"] == "cancelled" and status["state"] == "cancelled"
    assert 0 < len(records) < 50
    assert signal.getsignal(signal.SIGTERM) == before  # handler restored
    assert CounterEnv.instances[-1].closed


def test_sigusr1_stops_at_the_time_limit_as_failed_naming_the_limit_and_keeps_records(tmp_path, manager, monkeypatch):
    _signal_at_step_12(monkeypatch, signal.SIGUSR1)  # what Slurm's --signal sends before the time limit
    monkeypatch.setenv("ARENA_TIME_LIMIT", "launch.slurm.time=00:10:00")
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=50, num_envs=1)
    before = signal.getsignal(signal.SIGUSR1)
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, status = _read(tmp_path / "out")
    assert result["state"] == "failed" and status["state"] == "failed"
    assert result["error"].startswith("stopped at the time limit (launch.slurm.time=00:10:00) before the run finished")
    assert f"{len(records)} of 50 episode(s) recorded" in result["error"]
    assert f"`arena run --resume {tmp_path / 'out'}` runs the rest" in result["error"]
    assert 0 < len(records) < 50
    assert signal.getsignal(signal.SIGUSR1) == before


def test_sigusr1_after_a_backend_wrote_its_reason_fails_the_run_with_that_reason(tmp_path, manager, monkeypatch):
    reason = "policy server 'x' exited (code 137) and was restarted 2 time(s): Killed"
    # what a Slurm job does when the server it watches is gone for good
    _signal_at_step_12(monkeypatch, signal.SIGUSR1, lambda: (tmp_path / "out" / "count" / "stop_reason").write_text(reason + "\n"))
    snap = _snapshot(tmp_path / "e.yaml", num_episodes=50, num_envs=1)
    (tmp_path / "out" / "count").mkdir(parents=True)
    (tmp_path / "out" / "count" / "stop_reason").write_text("a stale reason of an earlier attempt")
    assert run_one(snap, "count", tmp_path / "out", manager=manager) == 3
    records, result, status = _read(tmp_path / "out")
    assert result["state"] == status["state"] == "failed"
    assert result["error"] == reason
    assert not (tmp_path / "out" / "count" / "stop_reason").exists()  # read once: a resume does not inherit it
    assert 0 < len(records) < 50


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_a_record_is_written_leaves_the_record_counted(tmp_path, manager, monkeypatch, signum):
    """A record on disk is in run_result.json and status.json too, whenever the signal lands
    (here: right after the third record reached the disk, before run-one counted it)."""
    from arena.rollout import run_one as module

    real_write = module.RecordWriter.write
    written = []

    def write_then_signal(self, record):
        real_write(self, record)
        written.append(record.episode_index)
        if len(written) == 3:
            os.kill(os.getpid(), signum)  # the handler runs before this function returns

    monkeypatch.setattr(module.RecordWriter, "write", write_then_signal)
    snap = _snapshot(tmp_path / "experiment.yaml", num_episodes=20, num_envs=1)
    out = tmp_path / "out"
    assert run_one(snap, "count", out, manager=manager) == 3
    records, result, status = _read(out)
    assert len(records) == 3
    assert result["state"] == "cancelled" and result["episodes"] == 3
    assert status["state"] == "cancelled" and status["episodes_done"] == 3
