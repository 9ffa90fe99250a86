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


@pytest.mark.parametrize("factors, design, factor, words", [
    ({"image_noise": [0, 10]}, "one_at_a_time", "image_noise", "level '0' (0) leaves image_noise at 0.0, its value in 'toy.nominal'"),
    ({"image_noise": {"none": 0.0}}, "one_at_a_time", "image_noise", "'toy.image_noise-none' would repeat that run"),
    ({"image_noise": [10], "action_delay": [0, 2]}, "full_factorial", "action_delay", "level '0' (0) leaves action_delay at 0"),
])
def test_a_level_at_the_nominal_value_is_an_error_not_a_second_nominal_run(factors, design, factor, words):
    with pytest.raises(ConfigError) as info:
        _load({"runs": ["toy"], "design": design, "factors": factors})
    assert info.value.key == f"perturbations.factors.{factor}"
    assert words in str(info.value) and "sweep.yaml" in str(info.value) and "drop the level" in str(info.value)


def test_a_level_equal_to_the_runs_own_value_repeats_its_nominal_run():
    data = {**BASE, "runs": {**BASE["runs"], "toy": {**BASE["runs"]["toy"], "environment": {
        "type": "arena.testing.envs:ToyReachEnv", "perturbations": {"image_noise": 10}}}},
            "perturbations": {"runs": ["toy"], "factors": {"image_noise": [10, 20]}}}
    with pytest.raises(ConfigError, match="leaves image_noise at 10.0, its value in 'toy.nominal'") as info:
        load_experiment_dict(data, source="sweep.yaml")
    assert info.value.key == "perturbations.factors.image_noise"


def test_two_levels_equal_once_parsed_name_both_labels():
    with pytest.raises(ConfigError) as info:
        _load({"runs": ["toy"], "factors": {"image_noise": [10, 10.0]}})
    assert info.value.key == "perturbations.factors.image_noise"
    assert "levels '10' (10) and '10_0' (10.0) are the same setting" in str(info.value)
    assert "'toy.image_noise-10' and 'toy.image_noise-10_0'" in str(info.value)


_MATRIX = {"axes": {"n": {"key": "rollout_limit.num_episodes", "values": [1, 2]}}}


@pytest.mark.parametrize("matrix_runs, sweep_runs, default", [(None, None, True), (["toy"], ["toy"], False)])
def test_a_run_in_both_the_matrix_and_the_sweep_is_refused_naming_the_key(matrix_runs, sweep_runs, default):
    matrix = {**_MATRIX, **({"runs": matrix_runs} if matrix_runs else {})}
    section = {"factors": {"image_noise": [10]}, **({"runs": sweep_runs} if sweep_runs else {})}
    with pytest.raises(ConfigError) as info:
        load_experiment_dict({**BASE, "matrix": matrix, "perturbations": section}, source="sweep.yaml")
    assert info.value.key == "perturbations.runs" and "sweep.yaml" in str(info.value)
    assert "expanded by both `matrix` and `perturbations`" in str(info.value)
    assert ("the sweep takes every run" in str(info.value)) is default


def test_the_matrix_and_the_sweep_expand_different_runs_of_one_experiment():
    exp = load_experiment_dict({**BASE, "matrix": {**_MATRIX, "runs": ["other"]},
                                "perturbations": {"runs": ["toy"], "factors": {"image_noise": [10]}}}, source="sweep.yaml")
    assert list(exp.runs) == ["toy.nominal", "toy.image_noise-10", "other.1", "other.2"]
    assert exp.runs["other.2"].rollout_limit.num_episodes == 2 and exp.runs["other.2"].environment.perturbations == {}


def test_overrides_set_the_section_like_shared():
    exp = _load({"runs": ["toy"], "factors": {"image_noise": [10], "action_delay": [2]}},
                ["perturbations.factors.image_noise=[20, 40]", "perturbations.factors.action_delay=null",
                 "perturbations.design=full_factorial", "perturbations.runs=null"])
    assert list(exp.runs) == ["toy.nominal", "toy.image_noise-20", "toy.image_noise-40",
                              "other.nominal", "other.image_noise-20", "other.image_noise-40"]
    assert exp.runs["other.image_noise-40"].environment.perturbations == {"image_noise": 40}


def test_an_override_alone_makes_a_sweep():
    exp = load_experiment_dict(BASE, ["perturbations.factors.action_delay=[3]", "perturbations.runs=[toy]"], source="sweep.yaml")
    assert list(exp.runs) == ["toy.nominal", "toy.action_delay-3", "other"]


@pytest.mark.parametrize("token, key, words", [
    ("perturbations.design=full", "perturbations.design", "design must be one of"),
    ("perturbations.grid=1", "perturbations", "got grid"),
    ("perturbations.factors.image_noise=[0,0.1]", "perturbations.factors.image_noise", "level '0' (0) leaves image_noise"),
    ("perturbations.runs=[nope]", "perturbations.runs", "runs of the experiment"),
])
def test_an_error_the_override_caused_names_it(token, key, words):
    with pytest.raises(ConfigError) as info:
        _load({"runs": ["toy"], "factors": {"image_noise": [10]}}, [token])
    assert info.value.key == key and words in str(info.value)
    assert f"(from override '{token}')" in str(info.value) and "sweep.yaml" in str(info.value)


def test_an_error_no_override_caused_does_not_blame_one():
    with pytest.raises(ConfigError) as info:
        _load({"runs": ["toy"], "factors": {"image_noise": [0]}}, ["perturbations.design=full_factorial"])
    assert info.value.key == "perturbations.factors.image_noise" and "from override" not in str(info.value)
