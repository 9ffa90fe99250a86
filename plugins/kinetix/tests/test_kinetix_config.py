"""The ``kinetix`` environment's config and declarations, in arena's own interpreter (no JAX)."""

from __future__ import annotations

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena_kinetix.config import RTC_LEVELS, RTC_ONLY, SHIPPED, KinetixConfig
from arena_kinetix.env import KinetixEnvironment


def experiment(environment: dict) -> dict:
    return {"runs": {"k": {"environment": {"type": "kinetix", **environment}, "policy": {"type": "zero_action"}}}}


def test_rtc_levels_split_into_shipped_and_rtc_only():
    assert len(RTC_LEVELS) == 12 and len(SHIPPED) == 8
    assert set(RTC_ONLY) == {"catapult", "cartpole_thrust", "catcher_v3", "trampoline"}


def test_a_shipped_level_resolves_inside_kinetix_env():
    assert KinetixConfig(task="grasp_easy").level_path() == "l/grasp_easy"
    assert KinetixConfig(task="m/h5_flappy_bird").level_path() == "m/h5_flappy_bird"


def test_an_rtc_only_level_without_its_file_is_named_with_where_it_comes_from():
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(experiment({"task": "catapult"}), source="k.yaml")
    text = str(info.value)
    assert "catapult" in text and "worlds/l/catapult.json" in text and "level_dir" in text and "k.yaml" in text


def test_level_dir_supplies_the_missing_levels(tmp_path):
    (tmp_path / "catapult.json").write_text("{}")
    config = KinetixConfig(task="catapult", level_dir=str(tmp_path))
    assert config.level_path() == str((tmp_path / "catapult.json").resolve())
    with pytest.raises(ValueError, match="has no trampoline.json"):
        KinetixConfig(task="trampoline", level_dir=str(tmp_path))


def test_suite_expands_to_one_run_per_level():
    exp = load_experiment_dict(experiment({"suite": "rtc_shipped"}), source="k.yaml")
    assert sorted(exp.runs) == sorted(f"k.{name}" for name in RTC_LEVELS if name in SHIPPED)
    assert exp.runs["k.car_launch"].environment.task == "car_launch"
    with pytest.raises(ConfigError, match="catapult"):
        load_experiment_dict(experiment({"suite": "rtc"}), source="k.yaml")  # the four need level_dir


def test_live_mode_declarations():
    config = KinetixConfig(task="grasp_easy")
    assert KinetixEnvironment.hold_rules_for(config) == ("continue_chunk", "repeat_last", "null_action")
    assert KinetixEnvironment.control_hz_for(config) == 10.0
    assert KinetixEnvironment.null_action_for(config).tolist() == [0.0] * 6
    assert KinetixEnvironment.default_max_episode_steps == 256
    assert config.action_noise == 0.1 and config.frame_skip == 2 and config.obs_type == "symbolic"
