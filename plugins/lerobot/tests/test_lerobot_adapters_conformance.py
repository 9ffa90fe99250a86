"""The LeRobot adapters pass arena's conformance check (``arena.testing.conformance``): a
scripted expert's successes survive being served through each adapter's ``pack_actions`` and
read back by a remote policy holding the adapter.

Meta-World's expert reads the 39-dim state, so behind ``metaworld_environment_state`` it acts
on the adapter's own request (a wrong slice or a lost value fails it); PushT's expert pushes
from privileged state, so its actions are replayed through ``pusht``. ``metaworld`` (image),
``aloha`` and ``libero`` pass actions through unchanged (as lerobot-eval does) and their
requests are pinned by the equivalence tests; an expert replay through them costs 1 to 10 CI
minutes of software rendering for a check of the identity, so it is not run here. The remote
policy types are the existing ones (``metaworld_expert_remote``, ``pi0_remote``: the adapter handed to the check replaces
theirs); the reply key is the one they read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arena.testing.conformance import Expert, check_adapter_conformance
from arena_lerobot.adapters import LeRobotMetaWorldEnvironmentStateAdapter

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


def test_the_pusht_expert_survives_the_pusht_adapter(tmp_path):
    """PushT's expert pushes from privileged state, so its actions are replayed through the
    adapter (gym-pusht's absolute disc targets, passed through as lerobot-eval does)."""
    from types import SimpleNamespace

    from arena.testing.venvs import benchmark_python
    from arena_lerobot.adapters import LeRobotPushTAdapter
    from arena_lerobot.pusht.expert import PushTExpert, PushTExpertConfig

    benchmark_python("pusht", "arena venv setup pusht")
    expert = PushTExpert(PushTExpertConfig())
    expert.start(SimpleNamespace(num_envs=1))
    report = check_adapter_conformance(
        LeRobotPushTAdapter(),
        Expert(act=lambda obs, i: expert.get_action(None, obs)[i], reset=lambda seed: expert.reset([0])),
        environment={"type": "pusht", "obs_type": "state"},
        policy={"type": "pi0_remote", "policy_variant": "pi05", "openpi_embodiment_adapter": "libero",
                "open_loop_horizon": 8},
        seeds=SEEDS, max_episode_steps=300, output_dir=tmp_path,
    )
    assert report.expert_outcomes == report.adapter_outcomes == ["success"] * len(SEEDS)
    assert report.adapter_steps == report.expert_steps
