"""``arena run`` on ALOHA sim is openpi's ALOHA sim client: byte-equal requests, identical
actions, physics states, episode lengths and outcomes.

The reference is openpi's ``examples/aloha_sim`` (openpi 15a9616): its ``AlohaSimEnvironment``
(``env.py``) written out below with the real ``openpi-client`` runtime around it, exactly as
``main.py`` assembles it: ``Runtime(environment, PolicyAgent(ActionChunkBroker(
WebsocketClientPolicy(host, port), action_horizon=10)))``. The environment seeds
``np.random.default_rng(seed=0)`` and resets gym-aloha with ``int(rng.integers(2**32 - 1))``
per episode (first draw: 3653403230); each observation becomes ``{"state": agent_pos,
"images": {"cam_high": CHW uint8 of resize_with_pad(top, 224, 224)}}``; each action goes to
``gym.step(action["actions"])`` as the broker sliced it (a float64 row). gym-aloha runs in
the ALOHA venv behind :func:`arena_aloha.testing.raw_gym_aloha_server`.

openpi's example sends no prompt (the ``pi0_aloha_sim`` server inserts its default,
"Transfer cube"); arena sends that prompt explicitly — the only key allowed to differ, and
it is asserted to be exactly that. ``Runtime(max_episode_steps=N)`` ends an episode after
``N + 1`` steps (it tests the count before incrementing it), so arena's step limit here is
``N + 1``.

Both sides talk to one recording server. Its reply ``i``: ``float64 (50, 14)`` chunks, random
(the request's state plus noise) for the first two episodes and the scripted transfer-cube
expert's actions on that seed (replayed-expert) for the next two. arena's side is one
``arena run`` of four one-episode runs (seed = openpi's draw ``i``) on
:class:`arena_aloha.testing.TracedAlohaEnvironment` in a worker under the ALOHA venv.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.testing.frames import read_frame_files
from arena.testing.plugin_tests import (
    RawSimulator, arena_run, assert_same_steps, record_expert_actions, traced_episodes,
)
from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

GYM_ID = "gym_aloha/AlohaTransferCube-v0"
RUNTIME_MAX_STEPS = int(os.environ.get("ARENA_ALOHA_REFERENCE_STEPS", "11"))
EPISODE_STEPS = RUNTIME_MAX_STEPS + 1  # openpi's Runtime runs one step more than its limit
ACTION_HORIZON, CHUNK_ROWS = 10, 50
EPISODES = 4
RANDOM_EPISODES, EXPERT_EPISODES = (0, 1), (2, 3)
ENV = {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}


def openpi_seeds(n: int) -> list[int]:
    """The gym seeds openpi's ``AlohaSimEnvironment(seed=0)`` resets its first ``n`` episodes with."""
    rng = np.random.default_rng(0)
    return [int(rng.integers(2**32 - 1)) for _ in range(n)]


SEEDS = openpi_seeds(EPISODES)


def openpi_aloha_sim_episodes(gym: RawSimulator, host: str, port: int) -> list[dict[str, Any]]:
    """openpi's ``examples/aloha_sim`` for ``EPISODES`` episodes; per episode its seed, the
    applied actions, physics states, step count and whether it succeeded."""
    from openpi_client import action_chunk_broker, image_tools
    from openpi_client import websocket_client_policy as _websocket_client_policy
    from openpi_client.runtime import environment as _environment
    from openpi_client.runtime import runtime as _runtime
    from openpi_client.runtime.agents import policy_agent as _policy_agent

    episodes: list[dict[str, Any]] = []

    class AlohaSimEnvironment(_environment.Environment):
        """openpi's ``examples/aloha_sim/env.py``, its gym calls sent to the ALOHA venv."""

        def __init__(self, task: str, obs_type: str = "pixels_agent_pos", seed: int = 0) -> None:
            np.random.seed(seed)
            self._rng = np.random.default_rng(seed)
            gym("make", task)
            self._last_obs = None
            self._done = True
            self._episode_reward = 0.0

        def reset(self) -> None:
            seed = int(self._rng.integers(2**32 - 1))
            gym_obs, _ = gym("reset", seed)
            self._last_obs = self._convert_observation(gym_obs)
            self._done = False
            self._episode_reward = 0.0
            episodes.append({"seed": seed, "start": gym("get_physics_state"), "actions": [], "states": [], "rewards": []})

        def is_episode_complete(self) -> bool:
            return self._done

        def get_observation(self) -> dict:
            if self._last_obs is None:
                raise RuntimeError("Observation is not set. Call reset() first.")
            return self._last_obs

        def apply_action(self, action: dict) -> None:
            gym_obs, reward, terminated, truncated, info = gym("step", action["actions"])
            self._last_obs = self._convert_observation(gym_obs)
            self._done = terminated or truncated
            self._episode_reward = max(self._episode_reward, reward)
            episodes[-1]["actions"].append(np.asarray(action["actions"]))
            episodes[-1]["states"].append(gym("get_physics_state"))
            episodes[-1]["rewards"].append(float(reward))
            episodes[-1]["success"] = bool(info["is_success"])

        def _convert_observation(self, gym_obs: dict) -> dict:
            img = gym_obs["pixels"]["top"]
            img = image_tools.convert_to_uint8(image_tools.resize_with_pad(img, 224, 224))
            img = np.transpose(img, (2, 0, 1))
            return {"state": gym_obs["agent_pos"], "images": {"cam_high": img}}

    runtime = _runtime.Runtime(
        environment=AlohaSimEnvironment(task=GYM_ID, seed=0),
        agent=_policy_agent.PolicyAgent(
            policy=action_chunk_broker.ActionChunkBroker(
                policy=_websocket_client_policy.WebsocketClientPolicy(host=host, port=port),
                action_horizon=ACTION_HORIZON,
            )
        ),
        subscribers=[],
        max_hz=0,
        num_episodes=EPISODES,
        max_episode_steps=RUNTIME_MAX_STEPS,
    )
    runtime.run()
    finished = episodes[:EPISODES]  # run() resets once more after the last episode
    for episode in finished:
        episode["steps"] = len(episode["actions"])
    return finished


EXPERT_SETUP = """
from arena_aloha.config import AlohaConfig
from arena_aloha.env import AlohaEnvironment
from arena_aloha.expert import AlohaTransferCubeExpert, AlohaTransferCubeExpertConfig

env = AlohaEnvironment(AlohaConfig(task="transfer_cube", cameras=[]), num_envs=1)
expert = AlohaTransferCubeExpert(AlohaTransferCubeExpertConfig())


def reset_expert(seed):
    expert.reset([0], [seed])
"""


def _expert_actions(python: Path, tmp: Path) -> dict[int, np.ndarray]:
    steps = -(-EPISODE_STEPS // ACTION_HORIZON) * ACTION_HORIZON
    seeds = [SEEDS[i] for i in EXPERT_EPISODES]
    return record_expert_actions(python, EXPERT_SETUP, seeds, steps, tmp / "expert.npz", env=ENV, timeout=900)


def _reply_factory(expert: dict[int, np.ndarray], model: Any):
    """Reply ``i``: per episode ``ceil(EPISODE_STEPS / 10)`` chunks, random then expert."""
    per_episode = -(-EPISODE_STEPS // ACTION_HORIZON)
    rng = np.random.default_rng(23)
    noise = [rng.normal(0.0, 0.05, (CHUNK_ROWS, 14)) for _ in range(EPISODES * per_episode)]

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        i = len(model.requests) - 1
        episode, j = divmod(i, per_episode)
        if episode in EXPERT_EPISODES:
            rows = expert[SEEDS[episode]][j * ACTION_HORIZON :]
            chunk = np.concatenate([rows, np.repeat(rows[-1:], CHUNK_ROWS - len(rows), 0)])[:CHUNK_ROWS]
        else:
            chunk = np.asarray(request["state"], np.float64) + noise[i]
            chunk[:, [6, 13]] = np.clip(chunk[:, [6, 13]], 0.0, 1.0)
        return {"actions": np.ascontiguousarray(chunk, np.float64)}

    return reply


def _arena_run(server: Any, trace_dir: Path, out: Path) -> subprocess.CompletedProcess:
    def run(seed: int) -> dict[str, Any]:
        return {
            "environment_builder": {"num_envs": 1, "seed": seed},
            "environment": {"type": "arena_aloha.testing:TracedAlohaEnvironment", "task": "transfer_cube",
                            "trace_dir": str(trace_dir)},
            "policy": {"type": "pi0_remote", "policy_variant": "pi0", "openpi_embodiment_adapter": "aloha",
                       "remote_host": server.host, "remote_port": server.port},
            "server": {"external": True},
        }

    experiment = {
        "requires": {"arena-plugin-aloha": ">=0.1", "arena-plugin-openpi": ">=0.1"},
        "shared": {"rollout_limit": {"num_episodes": 1, "max_episode_steps": EPISODE_STEPS}},
        "runs": {f"episode{i}": run(seed) for i, seed in enumerate(SEEDS)},
    }
    return arena_run(experiment, out, "--allow-import", "arena_aloha.testing", env=ENV, timeout=1800)


@pytest.fixture(scope="module")
def both_sides(tmp_path_factory) -> dict[str, Any]:
    from arena.results.run_summary import collect_run_records
    from arena.testing import OpenPIDouble, RecordingModel
    from arena_openpi.testing import METADATA, validate_aloha_request

    python = benchmark_python("aloha", "arena aloha setup")
    tmp = tmp_path_factory.mktemp("aloha-reference")
    expert = _expert_actions(python, tmp)
    model = RecordingModel(lambda request: reply(request), validate_aloha_request, metadata=METADATA["aloha"])
    reply = _reply_factory(expert, model)
    with OpenPIDouble(model) as server:
        with RawSimulator(python, "arena_aloha.testing", "gym-aloha", env=ENV) as gym:
            reference = openpi_aloha_sim_episodes(gym, server.host, server.port)
        reference_requests = list(model.requests)
        model.requests.clear()
        result = _arena_run(server, tmp / "trace", tmp / "out")
        arena_requests = list(model.requests)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    traces = sorted(read_frame_files(tmp / "trace"), key=lambda t: SEEDS.index(t[0]["seed"]))
    episodes = [episode for trace in traces for episode in traced_episodes(trace, keep=("seed",))]
    records = [collect_run_records(tmp / "out" / f"episode{i}")[0] for i in range(EPISODES)]
    return {"reference": reference, "reference_requests": reference_requests, "arena": episodes,
            "arena_requests": arena_requests, "records": records}


def test_requests_are_byte_equal_to_openpis_aloha_sim_client(both_sides):
    ours, theirs = both_sides["arena_requests"], both_sides["reference_requests"]
    assert len(theirs) == EPISODES * -(-EPISODE_STEPS // ACTION_HORIZON) and len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert sorted(b) == ["images", "state"] and sorted(a) == ["images", "prompt", "state"], i
        assert a["prompt"] == "Transfer cube", i  # pi0_aloha_sim's default prompt, which openpi's server inserts
        assert sorted(a["images"]) == sorted(b["images"]) == ["cam_high"], i
        for x, y, key in ((a["state"], b["state"], "state"), (a["images"]["cam_high"], b["images"]["cam_high"], "cam_high")):
            assert (x.dtype, x.shape) == (y.dtype, y.shape), f"request {i} {key}"
            assert x.tobytes() == y.tobytes(), f"request {i} {key}: {np.mean(x != y):.2%} differ"


def test_applied_actions_and_physics_states_are_identical(both_sides):
    ours, theirs = both_sides["arena"], both_sides["reference"]
    assert [e["seed"] for e in ours] == [e["seed"] for e in theirs] == SEEDS
    assert SEEDS[0] == 3653403230
    for a, b in zip(ours, theirs):
        assert len(a["actions"]) == len(b["actions"]) == EPISODE_STEPS
        assert_same_steps(a, b, f"seed {b['seed']}")  # the reset state, actions, physics states


def test_episode_lengths_and_outcomes_are_identical(both_sides):
    records, theirs = both_sides["records"], both_sides["reference"]
    assert [r.seed for r in records] == SEEDS
    assert [(r.steps, r.outcome == "success") for r in records] == [(e["steps"], e["success"]) for e in theirs]
    assert [r.env_extras["max_reward"] for r in records] == [max(e["rewards"]) for e in theirs]
    protocol = records[0].protocol
    assert protocol["benchmark"] == "aloha" and protocol["simulators"]["gym-aloha"] == "0.1.5"
    assert protocol["adapter"]["class"] == "arena_openpi.adapters:OpenPIAlohaAdapter"
