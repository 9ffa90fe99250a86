"""Decoded arrays are read-only views (as openpi's are): whoever receives them never writes
into them, or copies first. Every registered servable model answers a decoded request, the
openpi adapter turns a decoded reply into a writable chunk, and an env worker hands its
environment writable actions."""

from __future__ import annotations

import numpy as np
import pytest

from arena.plugins import get_registry
from arena.transport.codec import packb, unpackb

REQUESTS = {
    # What each registered model reads (the policies' pack_request sends these).
    "metaworld-expert": {"observation/state": np.linspace(-0.1, 0.1, 39), "task": "reach-v3", "prompt": "reach"},
    "isaaclab-reach-expert": {"observation/target_pos": np.array([0.3, 0.1, 0.4], np.float32)},
    "maniskill-push-cube": {
        "observation/tcp_pos": np.array([0.0, 0.0, 0.1]), "observation/cube_pos": np.array([0.05, 0.0, 0.02]),
        "observation/goal_pos": np.array([0.15, 0.0, 0.02]), "prompt": "push the cube",
    },
}
#: Models that need a stack arena's interpreter lacks; where their decoded requests are served.
COVERED_ELSEWHERE = {
    # torch and a checkpoint, in the lerobot venv: to_policy_batch stacks the decoded arrays into
    # new ones before torch sees them; served end to end with decoded requests there
    "lerobot": "plugins/lerobot/tests/test_serving.py",
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_every_servable_model_answers_a_read_only_request(name):
    servers = get_registry().servers
    if name not in servers:
        pytest.skip(f"{name} is not registered (its plugin is not installed)")
    model = servers[name]()
    model.load()
    request = unpackb(packb(REQUESTS[name]))
    arrays = [v for v in request.values() if isinstance(v, np.ndarray)]
    assert arrays and not any(a.flags.writeable for a in arrays)
    before = [a.copy() for a in arrays]
    reply = model.infer(request)
    assert np.all(np.isfinite(reply["actions"]))
    if hasattr(model, "infer_batch"):
        (batched,) = model.infer_batch([unpackb(packb(REQUESTS[name]))])
        np.testing.assert_array_equal(batched["actions"], reply["actions"])
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)


def test_registered_models_are_all_covered():
    """A new servable model gets a request here (or this test says which one is missing)."""
    missing = set(get_registry().servers) - set(REQUESTS) - set(COVERED_ELSEWHERE)
    assert not missing, sorted(missing)


def test_an_adapter_turns_a_decoded_reply_into_a_writable_chunk():
    from arena.policies.adapters import EmbodimentAdapter

    class EightDof(EmbodimentAdapter):
        action_dim = 8

    reply = unpackb(packb({"actions": np.ones((10, 8))}))
    assert not reply["actions"].flags.writeable
    chunk = EightDof().unpack_actions(reply, "actions")
    assert chunk.dtype == np.float64 and chunk.flags.writeable  # widened exactly (the reference clients hand float64 on)
    chunk[0, 0] = 5.0  # the chunk replay may edit its own copy
    assert reply["actions"][0, 0] == 1.0


def test_an_env_worker_hands_its_environment_writable_actions():
    from arena.envs.workers.worker import _Session
    from arena.testing.envs import ToyReachConfig, ToyReachEnv

    class ClipsInPlace(ToyReachEnv):  # as some simulators' wrappers do
        def step(self, actions):
            np.clip(actions, -0.5, 0.5, out=actions)
            return super().step(actions)

    session = _Session()
    session.env = ClipsInPlace(ToyReachConfig(cameras=False), num_envs=2)
    try:
        session.handle(unpackb(packb({"op": "reset", "env_ids": [0, 1], "seeds": [1, 2]})))
        message = unpackb(packb({"op": "step", "actions": np.ones((2, 2), np.float32)}))
        assert not message["actions"].flags.writeable  # as it comes off the socket
        reply, _ = session.handle(message)
        assert reply["ok"]
        assert message["actions"][0, 0] == 1.0
    finally:
        session.env.close()
