"""``rollout_limit.stop_when`` in ``arena run-one``: decided in seed order, complete, resumable."""

from __future__ import annotations

import json

import pytest
import yaml
from rollout_fakes import RolloutTestPlugin, expected_outcome
from typer.testing import CliRunner

from arena.cli import app
from arena.launch.submit import remaining_work
from arena.plugins import PluginManager
from arena.results.aggregate import build_experiment_result
from arena.results.report import write_report
from arena.outputs.records import read_records, write_json_atomic
from arena.rollout.run_one import run_one
from arena.outputs.stopping import SeedOrderStop

RULE = {"threshold": 0.7}
EPISODES = 120


@pytest.fixture
def manager():
    pm = PluginManager()
    pm.register(RolloutTestPlugin(), "rollout-test")
    return pm


def _snapshot(path, num_envs, rule=RULE, episodes=EPISODES):
    data = {"runs": {"count": {
        "environment": {"type": "counter", "task": "count-up"},
        "policy": {"type": "coin_flip"},
        "environment_builder": {"num_envs": num_envs, "seed": 0},
        "rollout_limit": {"num_episodes": episodes, "stop_when": rule},
    }}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _result(out):
    return json.loads((out / "count" / "run_result.json").read_text())


def test_runs_with_any_num_envs_stop_at_the_episode_the_outcomes_in_seed_order_decide(tmp_path, manager):
    # the decision computed from the outcomes alone, as the seeds give them
    expected = SeedOrderStop(RULE, range(EPISODES))
    expected.feed({i: expected_outcome(i) for i in range(EPISODES)})
    assert expected.decision is not None and 10 < expected.decision.episodes < EPISODES
    stops = {}
    for num_envs in (1, 4, 7):
        out = tmp_path / f"out{num_envs}"
        assert run_one(_snapshot(tmp_path / f"s{num_envs}.yaml", num_envs), "count", out, manager=manager) == 0
        result = _result(out)
        assert result["state"] == "completed" and result["error"] is None  # complete, not partial
        stops[num_envs] = result["stop"]
        records, _ = read_records(out / "count" / "episodes.jsonl")
        used = result["stop"]["episodes_used"]
        beyond = sorted(r.episode_index for r in records if r.episode_index >= used)
        assert beyond == result["stop"]["excluded_episodes"]  # in flight at the stop: kept, listed
        assert result["episodes"] == used and sum(result["counts"].values()) == used
        summary = build_experiment_result(out)["runs"]["count"]
        assert summary["n"] == used and summary["partial"] is False and summary["stop"]["wilson_ci95"] == summary["ci95"]
    d = expected.decision
    want = {"episodes_used": d.episodes, "decision": d.kind, "sequence_ci": list(d.sequence_ci),
            "successes": d.successes, "reason": d.reason}
    for num_envs, stop in stops.items():
        assert {k: stop[k] for k in want} == want, num_envs
    assert stops[1]["excluded_episodes"] == []  # one env: nothing runs past the stop
    assert stops[1]["decision"] == "below"


def test_a_stopped_run_is_complete_resume_runs_nothing_and_the_report_says_why(tmp_path, manager):
    out = tmp_path / "out"
    snap = _snapshot(tmp_path / "s.yaml", 3)
    assert run_one(snap, "count", out, manager=manager) == 0
    before = (out / "count" / "episodes.jsonl").read_bytes()
    assert run_one(snap, "count", out, manager=manager, resume=True) == 0
    assert (out / "count" / "episodes.jsonl").read_bytes() == before  # its remaining work items are not run
    assert _result(out)["stop"]["episodes_used"] < EPISODES
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": "e", "runs": {"count": {
        "num_episodes": EPISODES, "seed": 0, "work_items": [{"episode_index": i} for i in range(EPISODES)]}}})
    assert remaining_work(out) == {"count": []}
    html = write_report(out).read_text()
    assert "stopped early by its rule" in html and "not valid after data-dependent stopping" in html
    assert "betting-confidence-sequence" in html


def test_a_sharded_run_cannot_be_stopped_by_its_rule(tmp_path, manager, capsys):
    snap = _snapshot(tmp_path / "s.yaml", 2)
    assert run_one(snap, "count", tmp_path / "out", manager=manager, shard=(0, 2)) == 2
    assert "stop_when cannot stop a sharded run" in capsys.readouterr().err


@pytest.mark.parametrize(
    "rule,message",
    [({"paired_with": "other", "threshold": 0.5}, "paired stopping"), ({"confidence": 0.9}, "needs half_width or threshold"),
     ({"half_width": 0.7}, "half_width")],
)
def test_validate_refuses_a_rule_it_cannot_evaluate(tmp_path, rule, message):
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump({"runs": {"r": {
        "environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"},
        "rollout_limit": {"num_episodes": 10, "stop_when": rule}}}}))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and message in result.output and "stop_when" in result.output


def test_slurm_refuses_a_sharded_run_with_a_rule(tmp_path):
    from arena.config import load_experiment_dict
    from arena.errors import ConfigError
    from arena.launch.planning import plan_servers
    from arena.launch.submit import make_backend

    exp = load_experiment_dict({
        "launch": {"backend": "slurm", "slurm": {"shards": 2, "partition": "cpu"}},
        "runs": {"r": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"},
                       "rollout_limit": {"num_episodes": 10, "stop_when": {"threshold": 0.5}}}},
    }, source="e.yaml")
    with pytest.raises(ConfigError, match="cannot stop a run split into 2 shards") as info:
        make_backend(exp).check(exp, plan_servers(exp))
    assert info.value.run == "r"
