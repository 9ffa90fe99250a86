"""``lerobot_env``'s env config is checked when the experiment is read: an unknown LeRobot env type,
an unknown field, a field LeRobot accepts but never hands the env and a type the bridge cannot
run fail ``arena validate`` naming the file, the run and the key ``environment.env.<key>``,
without LeRobot in arena's interpreter (``arena_lerobot.envtypes``); and those tables equal
LeRobot 0.6.1's registry, read in the ``lerobot`` venv (``lerobot_env_types_reference.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import arena
from arena.cli import app
from arena.testing.venvs import run_in_venv
from arena_lerobot import envtypes
from arena_lerobot.bridge import ENV_PACKAGES
from arena_lerobot.venv import LEROBOT_VERSION

HERE = Path(__file__).resolve().parent
POLICY = "policy: {type: zero_action}"

# (id, the env mapping, substrings the error must hold)
REFUSED = [
    ("typo_type", "{type: pushtt}", ["environment.env.type", "'pushtt'", "did you mean 'pusht'", "aloha, metaworld, pusht",
                                     "so101", "discover_packages_path"]),
    ("unknown_field", "{type: pusht, episode_lenght: 40}", ["environment.env.episode_lenght", "did you mean 'episode_length'"]),
    ("unknown_so101_field", "{type: so101, image: true}", ["environment.env.image", "lerobot_env_so101==0.4.0",
                                                           "image_obs"]),
    ("ignored_field", "{type: metaworld, task: metaworld-reach-v3, episode_length: 100}",
     ["environment.env.episode_length", "500 steps", "rollout_limit.max_episode_steps"]),
    ("ignored_size", "{type: pusht, observation_height: 96}", ["environment.env.observation_height", "96x96"]),
    ("env_processor_type", "{type: libero, task: libero_10}", ["environment.env.type", "LiberoProcessorStep",
                                                               "lerobot/libero"]),
    ("real_robot_type", "{type: gym_manipulator}", ["environment.env.type", "make_robot_env"]),
    ("empty_plugin", "{type: my_env, discover_packages_path: ''}", ["environment.env.discover_packages_path"]),
]


def _validate(tmp_path: Path, env: str, command: str = "validate"):
    path = tmp_path / "bridge_experiment.yaml"
    path.write_text(f"runs:\n  bridge:\n    environment: {{type: lerobot_env, env: {env}}}\n    {POLICY}\n")
    extra = ["--output-dir", str(tmp_path / "out")] if command == "run" else []
    result = CliRunner().invoke(app, [command, str(path), *extra])
    return result, " ".join(result.output.split())


@pytest.mark.parametrize(("env", "needles"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_lerobot_env_config_fails_validate_naming_file_run_and_key(tmp_path, command, env, needles):
    result, message = _validate(tmp_path, env, command)
    assert result.exit_code == 2, message
    for needle in ["bridge_experiment.yaml", "run 'bridge'", *needles]:
        assert needle in message, (needle, message)
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # `arena run` refused it before starting anything


@pytest.mark.parametrize("env", [
    "{type: pusht, episode_length: 40, obs_type: pixels_agent_pos}",
    "{type: so101, episode_length: 30}",
    "{type: aloha, task: AlohaTransferCube-v0}",
    "{type: my_env, discover_packages_path: my_envs, anything: 1}",  # a third-party type: LeRobot checks its fields
])
def test_known_types_and_named_third_party_packages_validate(tmp_path, env):
    result, message = _validate(tmp_path, env)
    assert result.exit_code == 0, message


def test_every_problem_of_one_env_config_is_named():
    problems = dict(envtypes.check_env_config({"type": "metaworld", "fps": 80, "taks": "x"}))
    assert set(problems) == {"fps", "taks"}
    assert "recording.fps" in problems["fps"] and "did you mean 'task'" in problems["taks"]


PLUGIN = '''
"""A LeRobot env package as a third party writes one: a gym env and its EnvConfig type."""
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from lerobot.envs.configs import EnvConfig


class Count(gym.Env):
    """agent_pos: the seed and the sum of the actions so far; reward: that sum."""

    observation_space = gym.spaces.Dict({"agent_pos": gym.spaces.Box(-1e9, 1e9, (2,), np.float64)})
    action_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = np.array([float(seed or 0), 0.0])
        return {"agent_pos": self.state.copy()}, {}

    def step(self, action):
        self.state[1] += float(np.sum(action))
        return {"agent_pos": self.state.copy()}, self.state[1], False, False, {"is_success": False}


gym.register(id="PKG/Count-v0", entry_point=Count)


@EnvConfig.register_subclass("TYPE")
@dataclass
class CountEnv(EnvConfig):
    task: str = "Count-v0"
    episode_length: int = 10

    @property
    def package_name(self):
        return "PKG"

    @property
    def gym_kwargs(self):
        return {"max_episode_steps": self.episode_length}
'''


def test_checked_tables_equal_lerobots_registry_and_a_named_package_registers_its_type(tmp_path):
    """In the lerobot venv: LeRobot's registered types and each config's fields are the
    tables'; the env processors and ignored fields are the ones listed (each ignored field
    changed leaves what builds the env unchanged, each other one changes it); a type only a
    package named by ``discover_packages_path`` registers builds and steps through the bridge."""
    package, kind = "arena_probe_envs", "arena_probe_count"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text(PLUGIN.replace("PKG", package).replace("TYPE", kind))
    here = Path(arena.__file__).resolve().parents[1], HERE.parent / "src", tmp_path  # this checkout's code first
    env = {"PYTHONPATH": os.pathsep.join(map(str, here)), "OMP_NUM_THREADS": "1"}
    checked = sorted(envtypes.IGNORED_FIELDS)
    got = run_in_venv("lerobot", str(HERE / "lerobot_env_types_reference.py"), "--plugin", package, kind, *checked,
                      env=env, timeout_s=300)

    assert got["lerobot"] == LEROBOT_VERSION
    builtin = got["builtin"]
    assert set(builtin) == set(envtypes.LEROBOT_ENV_FIELDS) | set(envtypes.REFUSED_ENV_TYPES)
    for name, fields in envtypes.LEROBOT_ENV_FIELDS.items():
        assert builtin[name]["fields"] == [*envtypes.COMMON_FIELDS, *fields], name
    assert {name for name, info in builtin.items() if info["processors"]} == envtypes.PROCESSOR_ENV_TYPES
    assert got["gym_manipulator_make_env"] == "ModuleNotFoundError"  # make_env cannot build a real robot's env
    assert got["third_party"] == {
        name: {"fields": [*envtypes.COMMON_FIELDS, *fields], "distribution": dist}
        for name, (dist, fields) in envtypes.THIRD_PARTY_ENV_FIELDS.items()
    }
    assert {name: sorted(fields) for name, fields in got["ignored"].items()} == {
        name: sorted(fields) for name, fields in envtypes.IGNORED_FIELDS.items()
    }
    assert set(ENV_PACKAGES) <= set(envtypes.known_types())

    plugin = got["plugin"]
    assert plugin["state"] == [[5.0, 0.0]] and plugin["reward"] == [3.0]  # seed 5, then three actions of 1
    assert plugin["max_episode_steps"] == 3 and plugin["protocol_plugin"] == package
    assert plugin["other_type"][0] == "ValueError" and kind in plugin["other_type"][1]  # LeRobot lists the types
    assert plugin["bad_field"][0] == "TypeError" and "colour" in plugin["bad_field"][1]
    assert plugin["missing_package"][0] == "ImportError" and "arena_no_such_package" in plugin["missing_package"][1]
