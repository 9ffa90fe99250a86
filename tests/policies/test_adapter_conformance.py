"""``arena.testing.conformance``: the Meta-World expert's success survives the ``metaworld``
state adapter, and a gripper the adapter inverts, or a state slice it swaps, fails loudly.

Meta-World's scripted pick-and-place needs the gripper (reach would not notice a flipped
one) and reads only the 39-dim state, so it runs behind the server on the adapter's request,
and the check covers both directions of the adapter. CPU, seconds per episode.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arena.policies.adapters import EmbodimentAdapter
from arena.policies.metaworld_expert import MetaWorldStateAdapter
from arena.models.metaworld_expert import MetaWorldExpertModel
from arena.testing.conformance import ConformanceError, Expert, check_adapter_conformance

TASK = "pick-place-v3"
SEEDS = [0, 1]
STEPS = 150


def metaworld_expert() -> Expert:
    """Meta-World's own expert: on arena's observation alone, and on the adapter's request."""
    model = MetaWorldExpertModel()

    def act(observation: dict[str, Any], env_id: int) -> np.ndarray:
        return model.infer({"observation/state": observation["policy"]["state"][env_id], "task": TASK})["actions"][0]

    return Expert(act=act, from_request=lambda request: model.infer(request)["actions"][0])


class FlippedGripperAdapter(MetaWorldStateAdapter):
    """A plugin bug: reads the model's gripper with the wrong sign."""

    def unpack_actions(self, response: dict[str, Any], key: str) -> np.ndarray:
        chunk = super().unpack_actions(response, key)
        chunk[:, 3] = -chunk[:, 3]
        return chunk


class SwappedStateAdapter(MetaWorldStateAdapter):
    """A plugin bug: sends the object's position where the hand's belongs (state[0:3] <-> [4:7])."""

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        request = super().pack_request(extracted, instruction)
        state = request["observation/state"].copy()
        state[0:3], state[4:7] = request["observation/state"][4:7], request["observation/state"][0:3]
        return {**request, "observation/state": state}


def _check(tmp_path, adapter: EmbodimentAdapter, label: str):
    return check_adapter_conformance(
        adapter,
        metaworld_expert(),
        environment={"type": "metaworld", "task": TASK},
        policy={"type": "metaworld_expert_remote"},  # the policy holds `adapter` itself
        seeds=SEEDS,
        max_episode_steps=STEPS,
        output_dir=tmp_path / label,
    )


def test_the_expert_survives_the_metaworld_adapter(tmp_path):
    report = _check(tmp_path, MetaWorldStateAdapter(), "metaworld")
    assert report.expert_outcomes == report.adapter_outcomes == ["success"] * len(SEEDS)
    assert report.adapter_steps == report.expert_steps


def test_an_inverted_gripper_fails_the_check(tmp_path):
    with pytest.raises(ConformanceError, match=r"FlippedGripperAdapter: the expert solved 2/2 alone but 0/2"):
        _check(tmp_path, FlippedGripperAdapter(), "flipped")


def test_a_swapped_state_slice_fails_the_check(tmp_path):
    with pytest.raises(ConformanceError, match=r"lost seeds \[0, 1\]"):
        _check(tmp_path, SwappedStateAdapter(), "swapped")


def test_pack_actions_inverts_unpack_actions_for_every_shipped_adapter():
    from arena.plugins import get_registry

    registry = get_registry()
    rng = np.random.default_rng(0)
    checked = []
    for family, name in [("openpi", "libero"), ("openpi", "aloha"), ("openpi", "droid"), ("metaworld_expert", "metaworld"),
                         ("cosmos", "droid")]:
        adapter = registry.adapter(family, name)()
        actions = rng.uniform(-1, 1, (5, adapter.action_dim))
        for key in ("actions", "action"):
            back = adapter.unpack_actions(adapter.pack_actions(actions, key), key)
            assert back.dtype == np.float64 and back.tobytes() == actions.tobytes(), (family, name)
        checked.append((family, name))
    assert len(checked) == 5
    with pytest.raises(ValueError, match=r"\(H, 7\)"):
        registry.adapter("openpi", "libero")().pack_actions(np.zeros((2, 6)))
