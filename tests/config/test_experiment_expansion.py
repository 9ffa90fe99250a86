"""A run whose environment config expands (a benchmark suite without a task) becomes one run
per task, named ``<run>.<suffix>``, everywhere the experiment is seen."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from arena.config import list_overrides, load_experiment, load_experiment_dict
from arena.envs.base import Environment, EnvironmentConfig
from arena.errors import ConfigError


class SuiteEnvConfig(EnvironmentConfig):
    suite: str = "small"
    task: int | None = Field(None, description="task index; null: every task of the suite")
    max_steps: int = 10

    def expand(self) -> dict[str, dict[str, Any]] | None:
        if self.task is not None:
            return None
        return {str(i): {"task": i} for i in range(3 if self.suite == "small" else 5)}


class SuiteEnv(Environment):
    name = "suite_env"
    Config = SuiteEnvConfig
    success_key = "success"


class LoopingEnvConfig(EnvironmentConfig):
    task: int | None = None

    def expand(self) -> dict[str, dict[str, Any]] | None:
        return {"0": {"task": 0}}  # never stops expanding


class LoopingEnv(Environment):
    name = "looping_env"
    Config = LoopingEnvConfig
    success_key = "success"


@pytest.fixture
def suite_manager(with_environments):
    return with_environments(suite_env=SuiteEnv, looping_env=LoopingEnv)


TEXT = """\
shared:
  policy: {type: fake_policy}
runs:
  before: {environment: {type: fake_env, task: reach}}
  spatial: {environment: {type: suite_env}}
  single: {environment: {type: suite_env, task: 1}}
"""


def test_suite_without_task_becomes_one_run_per_task_in_place(write, suite_manager):
    experiment = load_experiment(write(TEXT), manager=suite_manager)
    assert list(experiment.runs) == ["before", "spatial.0", "spatial.1", "spatial.2", "single"]
    assert [experiment.runs[f"spatial.{i}"].environment.task for i in range(3)] == [0, 1, 2]
    assert experiment.runs["single"].environment.task == 1


def test_parent_override_reaches_every_task_and_a_task_override_only_its_own(write, suite_manager):
    experiment = load_experiment(
        write(TEXT),
        ["runs.spatial.environment.max_steps=50", "runs.spatial.2.environment.max_steps=7", "shared.environment_builder.seed=4"],
        manager=suite_manager,
    )
    steps = [experiment.runs[f"spatial.{i}"].environment.max_steps for i in range(3)]
    assert steps == [50, 50, 7]
    assert {run.environment_builder.seed for run in experiment.runs.values()} == {4}


def test_override_changing_the_suite_changes_the_expansion(write, suite_manager):
    experiment = load_experiment(write(TEXT), ["runs.spatial.environment.suite=large"], manager=suite_manager)
    assert [n for n in experiment.runs if n.startswith("spatial.")] == [f"spatial.{i}" for i in range(5)]


def test_override_of_a_task_the_suite_does_not_have_names_it(write, suite_manager):
    with pytest.raises(ConfigError, match=r"spatial\.9"):
        load_experiment(write(TEXT), ["runs.spatial.9.environment.max_steps=7"], manager=suite_manager)


def test_expanded_runs_round_trip_through_the_snapshot(write, suite_manager):
    experiment = load_experiment(write(TEXT), manager=suite_manager)
    snapshot = experiment.snapshot()
    assert "spatial.1" in snapshot["runs"] and snapshot["runs"]["spatial.1"]["environment"]["task"] == 1
    again = load_experiment_dict(snapshot, source=experiment.source, manager=suite_manager)
    assert again == experiment
    one = load_experiment_dict(snapshot, ["runs.spatial.1.environment.max_steps=3"], manager=suite_manager)
    assert one.runs["spatial.1"].environment.max_steps == 3 and one.runs["spatial.0"].environment.max_steps == 10


def test_list_overrides_shows_each_expanded_run(write, suite_manager):
    keys = dict(list_overrides(load_experiment(write(TEXT), manager=suite_manager)))
    assert keys["runs.spatial.2.environment.task"] == 2
    assert "runs.spatial.environment.task" not in keys


def test_expansion_colliding_with_a_written_run_is_an_error(write, suite_manager):
    text = TEXT + "  spatial.1: {environment: {type: suite_env, task: 1}}\n"
    with pytest.raises(ConfigError, match=r"spatial' expands into 'spatial\.1', which is already a run"):
        load_experiment(write(text), manager=suite_manager)


def test_environment_that_keeps_expanding_is_an_error(write, suite_manager):
    text = "runs:\n  loop: {environment: {type: looping_env}, policy: {type: fake_policy}}\n"
    with pytest.raises(ConfigError, match="would expand again"):
        load_experiment(write(text), manager=suite_manager)


@pytest.mark.parametrize("name", ["a.b.c", ".a", "a.", "1a.b", "a..b"])
def test_run_names_allow_one_suffix_only(write, suite_manager, name):
    text = f"runs:\n  '{name}': {{environment: {{type: fake_env, task: r}}, policy: {{type: fake_policy}}}}\n"
    with pytest.raises(ConfigError, match="invalid run name"):
        load_experiment(write(text), manager=suite_manager)
