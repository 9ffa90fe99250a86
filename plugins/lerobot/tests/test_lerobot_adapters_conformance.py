"""The LeRobot adapters pass arena's conformance check (``arena.testing.conformance``): a
scripted expert's successes survive being served through each adapter's ``pack_actions`` and
read back by a remote policy holding the adapter.

Meta-World's expert reads the 39-dim state, so behind ``metaworld_environment_state`` it acts
on the adapter's own request (a wrong slice or a lost value fails it); behind ``metaworld``
(image + 4-dim ``agent_pos``, which the expert cannot act on) and behind ``aloha`` and
``libero`` (experts on privileged state) its actions are replayed. PushT has no expert here
(arena's ``pusht`` environment is another branch's). The remote policy types are the existing
ones (``metaworld_expert_remote``, ``pi0_remote``: the adapter handed to the check replaces
theirs); the reply key is the one they read.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from arena.testing.conformance import Expert, check_adapter_conformance
from arena.testing.venvs import benchmark_python
from arena_lerobot.adapters import LeRobotMetaWorldAdapter, LeRobotMetaWorldEnvironmentStateAdapter

TASK = "pick-place-v3"
SEEDS = [0, 1]


def metaworld_expert() -> Expert:
    from arena.models.metaworld_expert import MetaWorldExpertModel

    model = MetaWorldExpertModel()

    def act(observation: dict[str, Any], env_id: int) -> np.ndarray:
        return model.infer({"observation/state": observation["policy"]["state"][env_id], "task": TASK})["actions"][0]

    def from_request(request: dict[str, Any]) -> np.ndarray:
        state = np.asarray(request["observation.environment_state"], np.float64)  # float32 on the wire
        return model.infer({"observation/state": state, "task": TASK})["actions"][0]

    return Expert(act=act, from_request=from_request)


def test_the_metaworld_expert_acts_on_the_environment_state_request(tmp_path):
    pytest.importorskip("metaworld")
    report = check_adapter_conformance(
        LeRobotMetaWorldEnvironmentStateAdapter(), metaworld_expert(),
        environment={"type": "metaworld", "task": TASK}, policy={"type": "metaworld_expert_remote"},
        seeds=SEEDS, max_episode_steps=150, output_dir=tmp_path,
    )
    assert report.expert_outcomes == report.adapter_outcomes == ["success"] * len(SEEDS)


@pytest.mark.slow  # ~80 s on a loaded CPU: 600 software-rendered frames
def test_the_metaworld_expert_survives_the_image_adapter(tmp_path):
    pytest.importorskip("metaworld")
    expert = metaworld_expert()
    report = check_adapter_conformance(
        LeRobotMetaWorldAdapter(), Expert(act=expert.act),
        environment={"type": "metaworld", "task": TASK, "cameras": True, "camera": "corner2", "image_size": 16},
        policy={"type": "metaworld_expert_remote", "open_loop_horizon": 4},
        seeds=SEEDS, max_episode_steps=150, output_dir=tmp_path,
    )
    assert report.expert_outcomes == report.adapter_outcomes == ["success"] * len(SEEDS)
    assert report.adapter_steps == report.expert_steps


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_transfer_cube_expert_survives_the_aloha_adapter(tmp_path, monkeypatch):
    from arena_aloha.expert import AlohaTransferCubeExpert, AlohaTransferCubeExpertConfig
    from arena_lerobot.adapters import LeRobotAlohaAdapter

    benchmark_python("aloha", "arena aloha setup")
    monkeypatch.setitem(os.environ, "MUJOCO_GL", os.environ.get("MUJOCO_GL", "osmesa"))
    expert = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())
    report = check_adapter_conformance(
        LeRobotAlohaAdapter(),
        Expert(act=lambda obs, i: expert.get_action(None, obs)[i], reset=lambda seed: expert.reset([0], [seed])),
        environment={"type": "aloha", "task": "transfer_cube", "image_height": 48, "image_width": 64},
        policy={"type": "pi0_remote", "policy_variant": "pi0", "openpi_embodiment_adapter": "aloha",
                "open_loop_horizon": 10},
        seeds=SEEDS, max_episode_steps=300, chunk_rows=50, output_dir=tmp_path,
    )
    assert report.expert_outcomes == report.adapter_outcomes == ["success", "success"]
    assert report.adapter_steps == report.expert_steps


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_the_pick_place_expert_survives_the_libero_adapter(tmp_path, monkeypatch):
    from arena_libero.env import LiberoConfig
    from arena_libero.expert import LiberoExpertConfig, LiberoPickPlaceExpert
    from arena_lerobot.adapters import LeRobotLiberoAdapter

    benchmark_python("libero", "arena libero setup")
    monkeypatch.setitem(os.environ, "MUJOCO_GL", os.environ.get("MUJOCO_GL", "osmesa"))
    expert = LiberoPickPlaceExpert(LiberoExpertConfig())
    expert.start(SimpleNamespace(num_envs=1, config=LiberoConfig(suite="libero_spatial", task=0)))
    report = check_adapter_conformance(
        LeRobotLiberoAdapter(),
        Expert(act=lambda obs, i: expert.get_action(None, obs)[i], reset=lambda seed: expert.reset([0])),
        environment={"type": "libero", "suite": "libero_spatial", "task": 0, "image_size": 32},
        policy={"type": "pi0_remote", "policy_variant": "pi05", "openpi_embodiment_adapter": "libero",
                "open_loop_horizon": 5},
        seeds=SEEDS, max_episode_steps=220, chunk_rows=10, output_dir=tmp_path,
    )
    assert report.expert_successes >= 1 and report.adapter_outcomes == report.expert_outcomes
    assert report.adapter_steps == report.expert_steps
