"""Precedence: defaults < shared < shared override < run value < run override; launch overrides."""

from __future__ import annotations

import pytest

from arena.config import load_experiment, load_experiment_dict

RUN = {"environment": {"type": "fake_env", "task": "reach"}, "policy": {"type": "fake_policy"}}


def _episodes(manager, shared=None, run_value=None, overrides=()):
    run = dict(RUN)
    if run_value is not None:
        run["rollout_limit"] = {"num_episodes": run_value}
    data = {"runs": {"alpha": run}}
    if shared is not None:
        data["shared"] = {"rollout_limit": {"num_episodes": shared}}
    return load_experiment_dict(data, overrides, manager=manager).runs["alpha"].rollout_limit.num_episodes


def test_field_default_applies_when_nothing_is_set(manager):
    assert _episodes(manager) == 10


def test_shared_value_beats_default(manager):
    assert _episodes(manager, shared=20) == 20


def test_shared_override_beats_shared(manager):
    assert _episodes(manager, shared=20, overrides=["shared.rollout_limit.num_episodes=30"]) == 30


def test_shared_override_works_without_shared_section(manager):
    assert _episodes(manager, overrides=["shared.rollout_limit.num_episodes=30"]) == 30


def test_run_value_beats_shared_override(manager):
    assert _episodes(manager, shared=20, run_value=40, overrides=["shared.rollout_limit.num_episodes=30"]) == 40


def test_run_override_beats_everything(manager):
    overrides = ["shared.rollout_limit.num_episodes=30", "runs.alpha.rollout_limit.num_episodes=50"]
    assert _episodes(manager, shared=20, run_value=40, overrides=overrides) == 50


def test_later_override_of_the_same_key_wins(manager):
    overrides = ["runs.alpha.rollout_limit.num_episodes=5", "runs.alpha.rollout_limit.num_episodes=6"]
    assert _episodes(manager, overrides=overrides) == 6


def test_shared_and_run_sections_merge_deeply(manager):
    data = {
        "shared": {
            "environment": {"type": "fake_env", "task": "reach", "options": {"a": 1, "b": 2}},
            "rollout_limit": {"num_episodes": 3, "max_episode_steps": 50},
        },
        "runs": {
            "alpha": {
                "environment": {"options": {"b": 20}},
                "policy": {"type": "fake_policy"},
                "rollout_limit": {"num_episodes": 4},
            }
        },
    }
    run = load_experiment_dict(data, manager=manager).runs["alpha"]
    assert run.environment.task == "reach"
    assert run.environment.options == {"a": 1, "b": 20}
    assert (run.rollout_limit.num_episodes, run.rollout_limit.max_episode_steps) == (4, 50)


def test_run_with_another_type_ignores_shared_fields_of_that_section(manager):
    data = {
        "shared": {"environment": {"type": "fake_env", "task": "reach", "horizon": 7}, "policy": {"type": "fake_policy", "scale": 3}},
        "runs": {
            "same": {},
            "other": {"environment": {"type": "other_env", "level": 2}, "policy": {"type": "fake_remote"}},
        },
    }
    experiment = load_experiment_dict(data, manager=manager)
    same, other = experiment.runs["same"], experiment.runs["other"]
    assert same.environment_type == "fake_env" and same.environment.horizon == 7 and same.policy.scale == 3
    assert other.environment_type == "other_env" and other.environment.level == 2
    assert other.policy_type == "fake_remote" and other.policy.open_loop_horizon == 8


def test_run_override_of_type_also_drops_shared_fields(manager):
    data = {"shared": {"policy": {"type": "fake_policy", "scale": 3}}, "runs": {"alpha": {"environment": RUN["environment"]}}}
    run = load_experiment_dict(data, ["runs.alpha.policy.type=fake_remote"], manager=manager).runs["alpha"]
    assert run.policy_type == "fake_remote"


def test_run_without_type_inherits_shared_type_and_fields(manager):
    data = {"shared": {"policy": {"type": "fake_remote", "open_loop_horizon": 2}}, "runs": {"alpha": {"environment": RUN["environment"], "policy": {"remote_port": 9000}}}}
    policy = load_experiment_dict(data, manager=manager).runs["alpha"].policy
    assert (policy.open_loop_horizon, policy.remote_port) == (2, 9000)


def test_override_values_are_parsed_as_yaml(manager):
    data = {"runs": {"alpha": {"environment": RUN["environment"], "policy": {"type": "fake_remote"}}}}
    overrides = [
        "runs.alpha.rollout_limit.terminate_on_success=false",
        "runs.alpha.rollout_limit.max_episode_steps=null",
        "runs.alpha.server.command=[serve, --port, '9']",
        "runs.alpha.policy.remote_host=10.0.0.7",
        "runs.alpha.environment.options={k: 1}",
    ]
    run = load_experiment_dict(data, overrides, manager=manager).runs["alpha"]
    assert run.rollout_limit.terminate_on_success is False
    assert run.rollout_limit.max_episode_steps is None
    assert run.server.command == ["serve", "--port", "9"]
    assert run.policy.remote_host == "10.0.0.7"
    assert run.environment.options == {"k": 1}


def test_launch_override_beats_the_file(write, manager, valid_text):
    path = write(valid_text.replace("  backend: local\n", "  backend: local\n  local: {jobs: 2}\n"))
    assert load_experiment(path, manager=manager).launch.options("local").jobs == 2
    experiment = load_experiment(path, ["launch.local.jobs=4", "launch.backend=slurm", "launch.slurm.partition=gpu"], manager=manager)
    assert experiment.launch.backend == "slurm"
    assert experiment.launch.options().partition == "gpu"
    assert experiment.launch.options("slurm").time_limit_min == 60
    assert experiment.launch.options("local").jobs == 4


def test_launch_watchdog_override_enables_watchdog_with_defaults(write, manager, valid_text):
    experiment = load_experiment(write(valid_text), ["launch.watchdog.stall_s=30"], manager=manager)
    watchdog = experiment.launch.watchdog
    assert watchdog is not None
    assert (watchdog.stall_s, watchdog.first_episode_grace_s, watchdog.max_restarts) == (30, 1800, 2)


def test_runs_keep_file_order(write, manager):
    text = "".join(f"  {n}: {{environment: {{type: fake_env, task: t}}, policy: {{type: fake_policy}}}}\n" for n in ("zeta", "alpha", "mid"))
    experiment = load_experiment(write("runs:\n" + text), manager=manager)
    assert list(experiment.runs) == ["zeta", "alpha", "mid"]
    assert experiment.name == "exp"


def test_class_path_type_is_resolved_and_kept_as_written(manager, monkeypatch):
    import sys
    import types

    from arena.envs.base import Environment, EnvironmentConfig

    module = types.ModuleType("arena_test_ext")

    class ExtEnv(Environment):
        success_key = "success"

        class Config(EnvironmentConfig):
            width: int = 3

    module.ExtEnv = ExtEnv
    monkeypatch.setitem(sys.modules, "arena_test_ext", module)
    data = {"runs": {"alpha": {"environment": {"type": "arena_test_ext:ExtEnv", "width": 5}, "policy": {"type": "fake_policy"}}}}
    run = load_experiment_dict(data, manager=manager, allow_imports=["arena_test_ext"]).runs["alpha"]
    assert run.environment_cls is ExtEnv and run.environment.width == 5
    assert run.to_dict()["environment"]["type"] == "arena_test_ext:ExtEnv"


@pytest.mark.parametrize("value", ["", "''"])
def test_empty_override_value_is_the_empty_string(manager, value):
    data = {"runs": {"alpha": {"environment": RUN["environment"], "policy": {"type": "fake_remote"}}}}
    run = load_experiment_dict(data, [f"runs.alpha.policy.remote_host={value}"], manager=manager).runs["alpha"]
    assert run.policy.remote_host == ""


def test_a_mapping_override_merges_into_the_section_instead_of_replacing_it(manager):
    data = {"shared": {"rollout_limit": {"num_episodes": 10, "max_episode_steps": 60}}, "runs": {"alpha": dict(RUN)}}
    limit = load_experiment_dict(data, ["shared.rollout_limit={num_episodes: 3}"], manager=manager).runs["alpha"].rollout_limit
    assert (limit.num_episodes, limit.max_episode_steps) == (3, 60)
    cleared = load_experiment_dict(data, ["shared.rollout_limit={max_episode_steps: null}"], manager=manager)
    assert cleared.runs["alpha"].rollout_limit.max_episode_steps is None
