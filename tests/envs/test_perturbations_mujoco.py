"""Simulator perturbations of the MuJoCo benchmarks (Meta-World, Franka Kitchen): each changes what
it claims (the frames, the objects' pose, the model arrays it names) and nothing else; at nominal
the first observation is byte-equal to the unperturbed environment's."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("metaworld")

from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment  # noqa: E402
from arena.envs.perturbations import MUJOCO  # noqa: E402
from arena.envs.perturbed import wrap  # noqa: E402

SEED = 7
SIZE = 32
IMAGE_ONLY = {
    "camera_shift": 0.1, "camera_height": -0.1, "camera_rotate": 10.0, "light_intensity": 0.3,
    "light_direction": 90.0, "table_color": [1.0, 0.2, 0.2],
}


def _metaworld(task: str = "push-v3", **perturbations):
    config = MetaWorldConfig(task=task, cameras=True, image_size=SIZE, perturbations=perturbations)
    return wrap(MetaWorldEnvironment(config, num_envs=1), MetaWorldEnvironment, config)


@pytest.fixture(scope="module")
def nominal():
    env = _metaworld()
    obs = env.reset_envs([0], [SEED])
    yield obs, env._envs[0].model
    env.close()


def test_metaworld_declares_every_mujoco_perturbation():
    assert {p.name for p in MetaWorldEnvironment.perturbations_for(MetaWorldConfig(task="reach-v3"))} == set(MUJOCO)


def test_metaworld_at_nominal_is_byte_equal_and_unwrapped(nominal):
    obs, _ = nominal
    env = _metaworld(**{name: p.nominal for name, p in MUJOCO.items()})
    assert type(env) is MetaWorldEnvironment and env._perturbers is None
    again = env.reset_envs([0], [SEED])
    assert again["camera_obs"]["corner"].tobytes() == obs["camera_obs"]["corner"].tobytes()
    assert again["policy"]["state"].tobytes() == obs["policy"]["state"].tobytes()
    env.close()


@pytest.mark.parametrize("name", sorted(IMAGE_ONLY))
def test_metaworld_scene_perturbations_change_the_frames_not_the_state(nominal, name):
    obs, _ = nominal
    env = _metaworld(**{name: IMAGE_ONLY[name]})
    perturbed = env.reset_envs([0], [SEED])
    assert not np.array_equal(perturbed["camera_obs"]["corner"], obs["camera_obs"]["corner"])
    assert perturbed["policy"]["state"].tobytes() == obs["policy"]["state"].tobytes()
    assert env.episode_info(0)["protocol"]["perturbations"] == {name: IMAGE_ONLY[name]}
    env.close()


def test_metaworld_object_offset_moves_the_puck_by_its_distance_and_not_the_hand(nominal):
    obs, _ = nominal
    env = _metaworld(object_offset=0.05)
    state = env.reset_envs([0], [SEED])["policy"]["state"][0]
    before = obs["policy"]["state"][0]
    np.testing.assert_array_equal(state[:4], before[:4])  # hand position and gripper
    moved = state[4:7] - before[4:7]  # the puck's position
    assert np.hypot(moved[0], moved[1]) == pytest.approx(0.05, abs=1e-6) and abs(moved[2]) < 1e-9
    np.testing.assert_array_equal(state[18:36], state[:18])  # the previous frame is the first one, as at reset
    np.testing.assert_array_equal(state[36:], before[36:])  # the goal
    env.close()


def test_metaworld_mass_and_friction_scale_only_the_free_objects(nominal):
    _, model = nominal
    env = _metaworld(object_mass=3.0, object_friction=0.5)
    env.reset_envs([0], [SEED])
    m = env._envs[0].model
    puck = int(m.jnt_bodyid[[j for j in range(m.njnt) if m.jnt_type[j] == 0][0]])
    assert m.body_mass[puck] == pytest.approx(3 * model.body_mass[puck])
    others = [b for b in range(m.nbody) if b != puck]
    np.testing.assert_array_equal(m.body_mass[others], model.body_mass[others])
    geoms = m.geom_bodyid == puck
    np.testing.assert_allclose(m.geom_friction[geoms, 0], 0.5 * model.geom_friction[geoms, 0])
    np.testing.assert_array_equal(m.geom_friction[~geoms], model.geom_friction[~geoms])
    env.close()


def test_franka_kitchen_camera_and_kettle_perturbations():
    pytest.importorskip("gymnasium_robotics")
    from arena.envs.franka_kitchen import FrankaKitchenConfig, FrankaKitchenEnvironment

    def build(**perturbations):
        config = FrankaKitchenConfig(task="microwave", image_height=24, image_width=32, perturbations=perturbations)
        return wrap(FrankaKitchenEnvironment(config, num_envs=1), FrankaKitchenEnvironment, config)

    plain, shifted = build(), build(camera_shift=0.1, object_offset=0.05)
    a, b = plain.reset_envs([0], [3]), shifted.reset_envs([0], [3])
    assert not np.array_equal(a["camera_obs"]["external_camera_rgb"], b["camera_obs"]["external_camera_rgb"])
    # the wrist camera stays on the hand; the arm's state is the same
    np.testing.assert_array_equal(a["policy"]["joint_pos"], b["policy"]["joint_pos"])
    qa, qb = plain._kitchens[0].data, shifted._kitchens[0].data
    m = shifted._model
    kettle = [j for j in range(m.njnt) if m.jnt_type[j] == 0][0]
    adr = int(m.jnt_qposadr[kettle])
    assert np.hypot(*(qb.qpos[adr:adr + 2] - qa.qpos[adr:adr + 2])) == pytest.approx(0.05, abs=1e-9)
    nominal = build(camera_shift=0.0, light_intensity=1.0)
    assert type(nominal) is FrankaKitchenEnvironment
    c = nominal.reset_envs([0], [3])
    assert c["camera_obs"]["external_camera_rgb"].tobytes() == a["camera_obs"]["external_camera_rgb"].tobytes()
    for env in (plain, shifted, nominal):
        env.close()


def test_metaworld_perturbations_in_a_worker_process_equal_in_process():
    from arena.envs.workers import build_environment

    values = {"camera_shift": 0.1, "object_offset": 0.05, "image_noise": 10.0}
    observed = []
    for workers in (0, 1):
        config = MetaWorldConfig(task="push-v3", cameras=True, image_size=SIZE, workers=workers, perturbations=values)
        env = wrap(build_environment(MetaWorldEnvironment, config, num_envs=1), MetaWorldEnvironment, config)
        try:
            observed.append((env.reset_envs([0], [SEED]), env.episode_info(0)["protocol"]["perturbations"]))
        finally:
            env.close()
    (a, pa), (b, pb) = observed
    assert a["camera_obs"]["corner"].tobytes() == b["camera_obs"]["corner"].tobytes()
    assert a["policy"]["state"].tobytes() == b["policy"]["state"].tobytes()
    assert pa == pb == values
