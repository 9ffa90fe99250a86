"""Section models: defaults, constraints and launch backend options."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arena.config import (
    EnvironmentBuilderConfig,
    LaunchConfig,
    RecordingConfig,
    RolloutLimitConfig,
    WatchdogConfig,
)


def test_section_defaults():
    assert EnvironmentBuilderConfig().model_dump() == {"num_envs": 1, "seed": 0}
    assert RolloutLimitConfig().model_dump() == {
        "num_episodes": 10, "max_episode_steps": None, "terminate_on_success": True, "stop_when": None, "detect": None
    }
    assert RecordingConfig().model_dump() == {"enabled": False, "camera": None, "fps": 20, "max_episodes": None}
    assert WatchdogConfig().model_dump() == {"stall_s": 600, "first_episode_grace_s": 1800, "max_restarts": 2}


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (EnvironmentBuilderConfig, {"num_envs": 0}),
        (RolloutLimitConfig, {"num_episodes": 0}),
        (RolloutLimitConfig, {"max_episode_steps": 0}),
        (RecordingConfig, {"fps": 0}),
        (RecordingConfig, {"max_episodes": -1}),
        (WatchdogConfig, {"stall_s": 0}),
        (WatchdogConfig, {"first_episode_grace_s": -1}),
        (WatchdogConfig, {"max_restarts": -1}),
        (WatchdogConfig, {"stall": 5}),
    ],
)
def test_section_constraints_are_enforced(model, data):
    with pytest.raises(ValidationError):
        model.model_validate(data)


def test_fields_carry_descriptions():
    for model in (EnvironmentBuilderConfig, RolloutLimitConfig, RecordingConfig, WatchdogConfig, LaunchConfig):
        assert all(field.description for field in model.model_fields.values()), model


def test_launch_options_default_when_absent(manager):
    launch = LaunchConfig.model_validate({}, context={"manager": manager})
    assert launch.backend == "local"
    assert launch.options().jobs == 1
    assert launch.options("slurm").partition == "cpu"
    with pytest.raises(KeyError):
        launch.options("osmo")


def test_launch_validates_each_backends_options(manager):
    launch = LaunchConfig.model_validate({"backend": "slurm", "slurm": {"partition": "gpu"}, "local": {"jobs": 3}}, context={"manager": manager})
    assert launch.options().partition == "gpu"
    assert launch.options("local").jobs == 3
    assert launch.model_dump() == {
        "backend": "slurm",
        "watchdog": None,
        "slurm": {"partition": "gpu", "time_limit_min": 60},
        "local": {"jobs": 3},
    }


def test_launch_refuses_unknown_backend_listing_registered(manager):
    with pytest.raises(ValidationError, match=r"registered: local, slurm"):
        LaunchConfig.model_validate({"backend": "k8s"}, context={"manager": manager})
