"""Generic perturbations (core's wrapper) on the pure-numpy toy environment, and their validation."""

from __future__ import annotations

import numpy as np
import pytest

from arena.config import load_experiment_dict
from arena.envs.perturbations import GENERIC, active_values, check_values
from arena.envs.perturbed import PerturbedEnvironment, perturb_instruction, wrap
from arena.errors import ConfigError
from arena.testing.envs import ToyReachConfig, ToyReachEnv

SEEDS = [11, 12, 13]


def _env(num_envs: int = 3, **perturbations):
    config = ToyReachConfig(image_size=24, perturbations=perturbations)
    return wrap(ToyReachEnv(config, num_envs=num_envs), ToyReachEnv, config)


def _first_obs(num_envs: int = 3, seeds=SEEDS, **perturbations):
    return _env(num_envs, **perturbations).reset_envs(list(range(num_envs)), list(seeds))


NOMINAL = _first_obs()


def test_every_generic_perturbation_at_nominal_leaves_the_environment_unwrapped():
    nominal = {name: p.nominal for name, p in GENERIC.items()}
    env = _env(**nominal)
    assert type(env) is ToyReachEnv
    obs = env.reset_envs([0, 1, 2], SEEDS)
    for cam in NOMINAL["camera_obs"]:
        assert obs["camera_obs"][cam].tobytes() == NOMINAL["camera_obs"][cam].tobytes()
    for key in NOMINAL["policy"]:
        assert obs["policy"][key].tobytes() == NOMINAL["policy"][key].tobytes()


@pytest.mark.parametrize("name, value", [
    ("image_noise", 20.0), ("image_blur", 1.5), ("jpeg_quality", 20), ("brightness", 1.6), ("contrast", 0.4),
])
def test_image_perturbations_change_frames_and_nothing_else(name, value):
    obs = _first_obs(**{name: value})
    frames, nominal = obs["camera_obs"]["top"], NOMINAL["camera_obs"]["top"]
    assert frames.shape == nominal.shape and frames.dtype == np.uint8
    assert not np.array_equal(frames, nominal)
    for key in NOMINAL["policy"]:
        assert obs["policy"][key].tobytes() == NOMINAL["policy"][key].tobytes()
    assert obs["task"] == NOMINAL["task"]


def test_brightness_scales_pixels_and_noise_has_its_std():
    frames = _first_obs(brightness=0.5)["camera_obs"]["top"].astype(float)
    assert np.allclose(frames, np.rint(NOMINAL["camera_obs"]["top"] * 0.5), atol=0.5)
    big = ToyReachConfig(image_size=128, perturbations={"image_noise": 10.0})
    env = wrap(ToyReachEnv(big, num_envs=1), ToyReachEnv, big)
    clean = ToyReachEnv(ToyReachConfig(image_size=128), num_envs=1).reset_envs([0], [5])["camera_obs"]["top"]
    noisy = env.reset_envs([0], [5])["camera_obs"]["top"]
    inside = (clean > 30) & (clean < 225)  # away from the clipping at 0 and 255
    assert 9.0 < (noisy.astype(float) - clean)[inside].std() < 11.0


def test_state_noise_changes_state_not_frames_and_is_fixed_by_the_episode_seed():
    obs = _first_obs(state_noise=0.01)
    assert obs["camera_obs"]["top"].tobytes() == NOMINAL["camera_obs"]["top"].tobytes()
    delta = obs["policy"]["position"] - NOMINAL["policy"]["position"]
    assert 0 < np.abs(delta).max() < 0.06 and obs["policy"]["position"].dtype == np.float32
    # the same episode seed on another env of another batch size: the same noise
    alone = _first_obs(num_envs=1, seeds=[SEEDS[2]], state_noise=0.01)
    assert np.array_equal(alone["policy"]["position"][0], obs["policy"]["position"][2])


def test_resetting_some_envs_keeps_the_other_envs_rows():
    env = _env(image_noise=15.0)
    first = env.reset_envs([0, 1, 2], SEEDS)
    again = env.reset_envs([1], [99])
    assert np.array_equal(again["camera_obs"]["top"][0], first["camera_obs"]["top"][0])
    assert np.array_equal(again["camera_obs"]["top"][2], first["camera_obs"]["top"][2])
    assert not np.array_equal(again["camera_obs"]["top"][1], first["camera_obs"]["top"][1])


class _Recorder(ToyReachEnv):
    """The toy env that keeps every action it was stepped with."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.applied = []

    def step(self, actions):
        self.applied.append(np.array(actions, copy=True))
        return super().step(actions)


def test_action_delay_applies_each_action_that_many_steps_late():
    config = ToyReachConfig(perturbations={"action_delay": 2})
    inner = _Recorder(config, num_envs=2)
    env = wrap(inner, _Recorder, config)
    env.reset_envs([0, 1], [1, 2])
    sent = [np.full((2, 2), 0.1 * (i + 1), np.float32) for i in range(5)]
    for action in sent:
        env.step(action)
    expected = [sent[0], sent[0], sent[0], sent[1], sent[2]]
    assert all(np.array_equal(a, b) for a, b in zip(inner.applied, expected))
    env.reset_envs([1], [3])  # a new episode on env 1 starts without env 1's old actions
    env.step(np.full((2, 2), 0.9, np.float32))
    assert np.allclose(inner.applied[-1][1], 0.9) and np.allclose(inner.applied[-1][0], sent[3][0])


def test_action_noise_is_seeded_and_clipped_to_the_action_space():
    config = ToyReachConfig(perturbations={"action_noise": 0.5})
    inner = _Recorder(config, num_envs=2)
    env = wrap(inner, _Recorder, config)
    env.reset_envs([0, 1], [4, 4])
    env.step(np.zeros((2, 2), np.float32))
    applied = inner.applied[0]
    assert applied.dtype == np.float32 and np.all(np.abs(applied) <= 1.0) and np.any(applied != 0)
    assert np.array_equal(applied[0], applied[1])  # same episode seed, same draw


def test_instruction_variants_replace_the_instruction_the_policy_gets():
    text = "pick up the red block and place it in the bowl"
    dropped = perturb_instruction(text, {"instruction_drop": 0.5})
    assert len(dropped.split()) == 11 - round(0.5 * 11) and set(dropped.split()) <= set(text.split())
    assert dropped == perturb_instruction(text, {"instruction_drop": 0.5})  # fixed by the text
    replaced = perturb_instruction(text, {"instruction_replace": 0.3})
    assert len(replaced.split()) == len(text.split()) and sum(a != b for a, b in zip(replaced.split(), text.split())) >= 1
    env = _env(instruction="steer the dot to the target")
    assert env.task_description == "steer the dot to the target"
    assert env.original_description == "move the red point onto the green target"


def test_records_protocol_carries_the_active_values():
    env = _env(image_noise=5.0, brightness=1.0)  # brightness nominal: not active
    assert isinstance(env, PerturbedEnvironment)
    assert env.episode_info(0)["protocol"] == {"perturbations": {"image_noise": 5.0}}


def test_unknown_perturbation_is_an_error_naming_the_environment_and_what_it_supports():
    with pytest.raises(ConfigError) as info:
        load_experiment_dict({"runs": {"a": {
            "environment": {"type": "metaworld", "task": "reach-v3", "perturbations": {"background_texture": 1}},
            "policy": {"type": "zero_action"}}}}, source="exp.yaml")
    message = str(info.value)
    assert "environment 'metaworld' does not support perturbation 'background_texture'" in message
    assert "camera_shift" in message and "image_noise" in message
    assert "environment.perturbations.background_texture" in message and "exp.yaml" in message


def test_toy_environment_supports_only_the_generic_perturbations():
    with pytest.raises(ValueError, match="toy_reach.*no simulator perturbation"):
        check_values(ToyReachEnv, ToyReachConfig(), {"camera_shift": 0.1})


def test_out_of_range_value_names_the_range_and_unit():
    with pytest.raises(ConfigError, match=r"image_blur: 50.0 is outside \[0.0, 20.0\] pixels"):
        load_experiment_dict({"runs": {"a": {
            "environment": {"type": "metaworld", "task": "reach-v3", "perturbations": {"image_blur": 50.0}},
            "policy": {"type": "zero_action"}}}})
    assert active_values(ToyReachEnv, ToyReachConfig(perturbations={"action_delay": 0, "contrast": 1})) == {}


def test_image_perturbations_without_cameras_fail_loudly_instead_of_doing_nothing():
    config = ToyReachConfig(cameras=False, perturbations={"image_noise": 10.0})
    env = wrap(ToyReachEnv(config, num_envs=1), ToyReachEnv, config)
    with pytest.raises(ValueError, match="no camera_obs: turn its cameras on"):
        env.reset_envs([0], [1])


def test_metaworld_image_perturbations_without_cameras_are_refused_at_validation():
    with pytest.raises(ConfigError, match="image perturbations \\(image_noise\\) need camera images"):
        load_experiment_dict({"runs": {"a": {
            "environment": {"type": "metaworld", "task": "reach-v3", "perturbations": {"image_noise": 5.0}},
            "policy": {"type": "zero_action"}}}})
    load_experiment_dict({"runs": {"a": {  # nominal values need no camera
        "environment": {"type": "metaworld", "task": "reach-v3", "perturbations": {"image_noise": 0.0}},
        "policy": {"type": "zero_action"}}}})
