"""Snapshot round trip, with_policy_endpoint and --list-overrides."""

from __future__ import annotations

import yaml

from arena.config import list_overrides, load_experiment, load_experiment_dict, write_snapshot
from arena.errors import ConfigError

import pytest


def test_snapshot_loads_back_to_an_equal_experiment(write, manager, valid_text):
    experiment = load_experiment(write(valid_text), ["runs.beta.policy.open_loop_horizon=2", "launch.watchdog.max_restarts=1"], manager=manager)
    again = load_experiment_dict(experiment.snapshot(), source=experiment.source, manager=manager)
    assert again == experiment


def test_written_snapshot_file_loads_back_equal(write, manager, valid_text, tmp_path):
    experiment = load_experiment(write(valid_text), manager=manager)
    target = tmp_path / "out" / "experiment.yaml"
    write_snapshot(experiment, target)
    again = load_experiment(target, manager=manager)
    assert again.runs == experiment.runs and again.launch == experiment.launch
    assert again.requires == experiment.requires
    assert [p.name for p in target.parent.iterdir()] == ["experiment.yaml"]  # no temp file left


def test_snapshot_has_no_shared_and_every_field(write, manager, valid_text):
    snapshot = load_experiment(write(valid_text), manager=manager).snapshot()
    assert set(snapshot) == {"name", "requires", "launch", "runs"}
    alpha = snapshot["runs"]["alpha"]
    assert alpha["environment"] == {
        "type": "fake_env", "task": "reach", "horizon": 100, "options": {}, "workers": 0, "python": None, "worker_timeout_s": 600.0, "perturbations": {},
    }
    assert alpha["environment_builder"] == {"num_envs": 2, "seed": 0}
    assert alpha["rollout_limit"] == {
        "num_episodes": 20, "max_episode_steps": None, "terminate_on_success": True, "stop_when": None, "detect": None
    }
    assert alpha["recording"]["fps"] == 20
    assert snapshot["launch"] == {"backend": "local", "watchdog": None, "local": {"jobs": 1}}
    yaml.safe_dump(snapshot)  # plain data only


def test_with_policy_endpoint_sets_remote_host_and_port(write, manager, valid_text):
    experiment = load_experiment(write(valid_text), manager=manager)
    moved = experiment.with_policy_endpoint("beta", "node17", 8123)
    assert (moved.runs["beta"].policy.remote_host, moved.runs["beta"].policy.remote_port) == ("node17", 8123)
    assert moved.runs["beta"].policy.open_loop_horizon == 4
    assert experiment.runs["beta"].policy.remote_host == "localhost"  # original unchanged
    local = experiment.with_policy_endpoint("alpha", "node17", 8123)
    assert local.runs["alpha"] == experiment.runs["alpha"]


def test_with_policy_endpoint_refuses_unknown_run_and_bad_port(write, manager, valid_text):
    experiment = load_experiment(write(valid_text), manager=manager)
    with pytest.raises(ConfigError, match="no run 'gamma'"):
        experiment.with_policy_endpoint("gamma", "h", 1)
    with pytest.raises(ConfigError) as info:
        experiment.with_policy_endpoint("beta", "h", 0)
    assert info.value.key == "policy.remote_port" and info.value.run == "beta"


def test_list_overrides_covers_shared_runs_and_launch(write, manager, valid_text):
    experiment = load_experiment(write(valid_text), ["launch.slurm.partition=gpu"], manager=manager)
    listed = dict(list_overrides(experiment))
    assert listed["shared.environment.task"] == "reach"
    assert listed["shared.environment_builder.num_envs"] == 2
    assert listed["runs.alpha.rollout_limit.num_episodes"] == 20
    assert listed["runs.alpha.rollout_limit.max_episode_steps"] is None  # defaults included
    assert listed["runs.alpha.policy.type"] == "fake_policy"
    assert listed["runs.beta.policy.open_loop_horizon"] == 4
    assert listed["runs.beta.policy.remote_port"] == 8000
    assert listed["runs.beta.server.external"] is False
    assert listed["launch.backend"] == "local"
    assert listed["launch.local.jobs"] == 1
    assert listed["launch.slurm.partition"] == "gpu"
    assert listed["launch.watchdog"] is None
    keys = [k for k, _ in list_overrides(experiment)]
    assert keys.index("shared.environment.type") < keys.index("runs.alpha.environment.type") < keys.index("launch.backend")


def test_list_overrides_accepts_raw_data(manager, valid_text):
    listed = dict(list_overrides(yaml.safe_load(valid_text), manager=manager))
    assert listed["runs.beta.policy.open_loop_horizon"] == 4
    assert listed["shared.rollout_limit.num_episodes"] == 20


def test_every_listed_key_is_accepted_as_an_override(write, manager, valid_text):
    path = write(valid_text)
    experiment = load_experiment(path, manager=manager)
    tokens = [f"{key}={yaml.safe_dump(value, default_flow_style=True).removesuffix(chr(10) + '...' + chr(10)).strip()}" for key, value in list_overrides(experiment)]
    again = load_experiment(path, tokens, manager=manager)
    assert again == experiment


def test_snapshot_keeps_the_experiment_name_when_reloaded(write, manager, valid_text, tmp_path):
    from arena.config import write_snapshot

    experiment = load_experiment(write(valid_text), manager=manager)
    write_snapshot(experiment, tmp_path / "out" / "experiment.yaml")
    again = load_experiment(tmp_path / "out" / "experiment.yaml", manager=manager)
    assert again.name == experiment.name != "experiment"
