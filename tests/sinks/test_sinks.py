"""Result sinks (arena.sinks): events raised where they happen, never in the way of a run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.config.tracking import ConfiguredSink, TrackingConfig
from arena.sinks import QUEUE_SIZE, ResultSink, SinkConfig, SinkContext, Sinks
from arena.testing.experiments import run_tiny_experiment, tiny_experiment
from arena.testing.sinks import read_events

SINK = "arena.testing.sinks:RecordingSink"


def _experiment(tracking: dict | None) -> dict:
    exp = tiny_experiment({"type": "random_action"}, episodes=3, max_episode_steps=8, run="reach")
    if tracking is not None:
        exp["tracking"] = tracking
    return exp


def _comparable(outcome) -> list[tuple]:
    return [(r["episode_index"], r["seed"], r["outcome"], r["steps"], r["return"]) for r in outcome.episodes("reach")]


def test_events_reach_the_sink_from_every_process(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    outcome = run_tiny_experiment(_experiment({"rec": {"type": SINK, "path": str(events)}, "step": 7}), tmp_path / "out")
    assert outcome.exit_code == 0, outcome.explain()
    got = read_events(events)
    kinds = [e["event"] for e in got]
    assert kinds.count("experiment_started") == 1 and kinds.count("experiment_finished") == 1
    assert kinds.count("episode_finished") == 3 and kinds.count("run_finished") == 1
    start = next(e for e in got if e["event"] == "experiment_started")
    assert start["role"] == "experiment" and start["config"]["runs"]["reach"]["policy"]["type"] == "random_action"
    assert start["config"]["tracking"]["step"] == 7
    episodes = [e for e in got if e["event"] == "episode_finished"]
    assert {e["role"] for e in episodes} == {"run"} and {e["run"] for e in episodes} == {"reach"}
    assert {e["pid"] for e in episodes} != {start["pid"]}  # raised in arena run-one, another process
    assert sorted(e["record"]["episode_index"] for e in episodes) == [0, 1, 2]
    assert sorted(e["record"]["outcome"] for e in episodes) == sorted(r["outcome"] for r in outcome.episodes("reach"))
    run_end = next(e for e in got if e["event"] == "run_finished")
    assert run_end["result"]["state"] == "completed" and run_end["result"]["episodes"] == 3
    end = next(e for e in got if e["event"] == "experiment_finished")
    assert end["result"]["runs"]["reach"]["n"] == outcome.result["runs"]["reach"]["n"]
    assert end["report"] == str(outcome.output_dir / "index.html")
    assert len({e["group"] for e in got}) == 1 and got[0]["group"].startswith("out-experiment-")  # named after the file
    assert {e["step"] for e in got} == {7}


@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_a_sink_that_raises_or_hangs_changes_nothing(tmp_path: Path, fault: str) -> None:
    events = tmp_path / "events.jsonl"
    every = ["experiment_started", "episode_finished", "run_finished", "experiment_finished", "close"]
    options = {"type": SINK, "path": str(events), "timeout_s": 1.0}
    options |= {"raise_on": every} if fault == "raise" else {"hang_on": every, "hang_s": 600.0}
    plain = run_tiny_experiment(_experiment(None), tmp_path / "plain")
    started = time.monotonic()
    faulty = run_tiny_experiment(_experiment({"bad": options}), tmp_path / "faulty")
    assert time.monotonic() - started < 120, "a hanging sink held the experiment up"
    assert faulty.exit_code == plain.exit_code == 0, faulty.explain()
    assert _comparable(faulty) == _comparable(plain)
    for key in ("state", "n", "k", "counts", "success_rate", "ci95", "errors"):
        assert faulty.result["runs"]["reach"][key] == plain.result["runs"]["reach"][key]
    assert read_events(events), "the sink was called"
    log = (faulty.output_dir / "reach" / "runner.log").read_text()
    if fault == "raise":
        assert "sink 'bad' failed in episode_finished: RuntimeError: injected sink failure" in log
    else:
        assert "sink 'bad' did not finish within 1 s" in log


class _Hanging(ResultSink):
    def episode_finished(self, run, record):
        time.sleep(600)


def test_raising_events_never_waits_for_a_stuck_sink(capfd) -> None:
    config = SinkConfig(timeout_s=0.5)
    tracking = TrackingConfig(sinks={"stuck": ConfiguredSink("stuck", _Hanging, config)})
    sinks = Sinks(tracking, SinkContext("e", Path("."), "e-1", "run", run="r"))
    started = time.monotonic()
    for i in range(QUEUE_SIZE + 50):
        sinks.episode_finished("r", {"episode_index": i})
    assert time.monotonic() - started < 5
    sinks.close()
    assert time.monotonic() - started < 10
    err = capfd.readouterr().err
    assert "queue of 1024 full): dropping events" in err and "did not finish within 0.5 s" in err


def test_tracking_config_errors_name_the_key() -> None:
    exp = _experiment({"nosuch": {}})
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(exp, source="exp.yaml")
    assert "unknown result sink 'nosuch'" in str(info.value) and "tracking.nosuch" in str(info.value)
    exp = _experiment({"rec": {"type": SINK, "path": "x", "nope": 1}})
    with pytest.raises(ConfigError, match="tracking.rec"):
        load_experiment_dict(exp, source="exp.yaml")
    with pytest.raises(ConfigError, match="tracking.step"):
        load_experiment_dict(_experiment({"step": "ten"}), source="exp.yaml")


def test_overrides_and_snapshot_carry_tracking_and_secret_names() -> None:
    exp = _experiment({"rec": {"type": SINK, "path": "x"}})
    resolved = load_experiment_dict(exp, ["tracking.step=1200", "tracking.rec.path=/tmp/y"], source="exp.yaml")
    assert resolved.tracking.step == 1200 and resolved.tracking.sinks["rec"].config.path == "/tmp/y"
    again = load_experiment_dict(resolved.snapshot(), source="experiment.yaml", trust_snapshot=True)
    assert again.snapshot() == resolved.snapshot() and again.snapshot()["tracking"]["rec"]["type"] == SINK


def test_sink_credentials_reach_every_runner_by_name() -> None:
    class Keyed(SinkConfig):
        api_key_env: str | None = "TRACKER_KEY"

    tracking = TrackingConfig(sinks={"k": ConfiguredSink("k", ResultSink, Keyed())})
    resolved = load_experiment_dict(_experiment(None), source="exp.yaml")
    import dataclasses

    with_key = dataclasses.replace(resolved, tracking=tracking)
    assert "TRACKER_KEY" in with_key.runs["reach"].runner_secrets()
