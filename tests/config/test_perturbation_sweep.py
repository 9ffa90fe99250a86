"""The experiment's `perturbations` section: one run becomes nominal + one run per factor level."""

from __future__ import annotations

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError

BASE = {
    "shared": {"environment_builder": {"num_envs": 1, "seed": 3}, "rollout_limit": {"num_episodes": 4}},
    "runs": {
        "toy": {"environment": {"type": "arena.testing.envs:ToyReachEnv"}, "policy": {"type": "zero_action"}},
        "other": {"environment": {"type": "arena.testing.envs:ToyReachEnv"}, "policy": {"type": "zero_action"}},
    },
}


def _load(section, overrides=()):
    return load_experiment_dict({**BASE, "perturbations": section}, overrides=list(overrides), source="sweep.yaml")


def test_one_at_a_time_expands_into_nominal_and_one_run_per_level_on_the_same_seeds():
    exp = _load({"runs": ["toy"], "factors": {"image_noise": [10, 40], "action_delay": {"late": 3}}})
    assert list(exp.runs) == ["toy.nominal", "toy.image_noise-10", "toy.image_noise-40", "toy.action_delay-late", "other"]
    assert exp.runs["toy.nominal"].environment.perturbations == {}
    assert exp.runs["toy.image_noise-40"].environment.perturbations == {"image_noise": 40}
    assert exp.runs["toy.action_delay-late"].environment.perturbations == {"action_delay": 3}
    assert {exp.runs[n].environment_builder.seed for n in exp.runs} == {3}


def test_full_factorial_has_every_combination_with_nominal():
    exp = _load({"runs": ["toy"], "design": "full_factorial", "factors": {"image_noise": [10], "action_delay": [1, 2]}})
    names = [n for n in exp.runs if n.startswith("toy.")]
    assert len(names) == 2 * 3 and names[0] == "toy.nominal"
    assert exp.runs["toy.image_noise-10--action_delay-2"].environment.perturbations == {"image_noise": 10, "action_delay": 2}


def test_overrides_of_the_parent_reach_every_swept_run_and_of_a_child_only_it():
    exp = _load({"runs": ["toy"], "factors": {"image_noise": [10]}},
                ["runs.toy.rollout_limit.num_episodes=7", "runs.toy.nominal.environment.image_size=8"])
    assert exp.runs["toy.image_noise-10"].rollout_limit.num_episodes == 7
    assert exp.runs["toy.nominal"].environment.image_size == 8
    assert exp.runs["toy.image_noise-10"].environment.image_size != 8


@pytest.mark.parametrize("section, key, words", [
    ({"factors": {}}, "perturbations.factors", "map perturbation names"),
    ({"factors": {"image_noise": []}}, "perturbations.factors.image_noise", "at least one level"),
    ({"factors": {"image_noise": [1]}, "design": "latin"}, "perturbations.design", "one_at_a_time"),
    ({"factors": {"image_noise": [1]}, "runs": ["nope"]}, "perturbations.runs", "runs of the experiment"),
    ({"factors": {"image_noise": [1]}, "grid": 1}, "perturbations", "holds `factors`"),
])
def test_malformed_section_names_the_key(section, key, words):
    with pytest.raises(ConfigError) as info:
        _load(section)
    assert info.value.key == key and words in str(info.value) and "sweep.yaml" in str(info.value)


def test_a_level_the_environment_does_not_support_names_the_swept_run():
    with pytest.raises(ConfigError) as info:
        _load({"runs": ["toy"], "factors": {"camera_shift": [0.1]}})
    assert info.value.run == "toy.camera_shift-0_1" and "does not support perturbation 'camera_shift'" in str(info.value)


def test_half_fraction_keeps_the_half_of_the_2k_design_holding_nominal():
    exp = _load({"runs": ["toy"], "design": "half_fraction",
                 "factors": {"image_noise": [10], "action_delay": [2], "state_noise": [0.1]}})
    swept = {n: exp.runs[n].environment.perturbations for n in exp.runs if n.startswith("toy.")}
    assert len(swept) == 4 and swept["toy.nominal"] == {}
    assert all(len(levels) in (0, 2) for levels in swept.values())
    # every factor is perturbed in half of the runs: main effects are balanced
    assert all(sum(f in levels for levels in swept.values()) == 2 for f in ("image_noise", "action_delay", "state_noise"))
    with pytest.raises(ConfigError, match="three or more factors of one level"):
        _load({"runs": ["toy"], "design": "half_fraction", "factors": {"image_noise": [10, 20], "action_delay": [2], "state_noise": [1]}})
