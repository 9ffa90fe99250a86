"""The scripted expert of ``Arena-Reach-Cube-v0``: closed-form inverse kinematics, numpy only.

It runs on the arena side (any interpreter): as the local policy ``isaaclab_reach_expert`` and
as a model of arena's own policy server (``arena serve isaaclab-reach-expert``), driven through
the remote client ``isaaclab_reach_expert_remote``.

The arm (``arena_isaaclab.sim.assets.ARM``): a base yaw joint, a shoulder pitch joint 0.3 m above
the ground, an elbow 0.3 m further and a 0.25 m last link; at zero angles it points straight up,
and a positive pitch tilts a link from vertical towards the yawed +x. For a target
``(x, y, z)`` (m, env frame) the yaw is ``atan2(y, x)``; in the arm's plane the target is at
``r = hypot(x, y)``, ``h = z - 0.3``; the elbow angle is ``acos(D)`` with
``D = (r^2 + h^2 - L2^2 - L3^2) / (2 L2 L3)`` (clipped: an out-of-reach target gets the arm
stretched towards it) and the shoulder ``atan2(r, h) - atan2(L3 sin q3, L2 + L3 cos q3)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: Shoulder height (m) and link lengths (m) of the reach arm (must match ``sim.assets.ARM``).
SHOULDER_HEIGHT = 0.3
UPPER_ARM = 0.3
FOREARM = 0.25
ACTION_DIM = 3


def reach(target: np.ndarray) -> np.ndarray:
    """Joint targets ``float32 (3,)`` (yaw, shoulder, elbow; rad) that put the tip at ``target`` (m)."""
    x, y, z = (float(v) for v in np.asarray(target, np.float64).reshape(3))
    yaw = math.atan2(y, x)
    r = math.hypot(x, y)
    h = z - SHOULDER_HEIGHT
    d = (r * r + h * h - UPPER_ARM**2 - FOREARM**2) / (2 * UPPER_ARM * FOREARM)
    elbow = math.acos(max(-1.0, min(1.0, d)))
    shoulder = math.atan2(r, h) - math.atan2(FOREARM * math.sin(elbow), UPPER_ARM + FOREARM * math.cos(elbow))
    return np.array([yaw, shoulder, elbow], np.float32)


def expert_actions(observation: dict[str, Any]) -> np.ndarray:
    """``float32 (N, 3)`` expert actions for a batched observation (reads ``policy/target_pos``)."""
    targets = np.asarray(observation["policy"]["target_pos"], np.float64)
    return np.stack([reach(t) for t in targets]).astype(np.float32)


# -- arena components -----------------------------------------------------------------------
# (imported lazily by plugin.py; they need arena-core only)

from pydantic import AliasChoices, Field  # noqa: E402

from arena.policies.adapters import EmbodimentAdapter  # noqa: E402
from arena.policies.base import PolicyBase, PolicyConfig  # noqa: E402
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig  # noqa: E402
from arena.servertask import ServerTask, arena_server_task  # noqa: E402


class ReachExpertConfig(PolicyConfig):
    """``isaaclab_reach_expert`` has no options."""


class ReachExpertPolicy(PolicyBase[ReachExpertConfig]):
    """The reach task's expert in this process: IK of ``policy/target_pos`` every step."""

    name = "isaaclab_reach_expert"
    Config = ReachExpertConfig

    def get_action(self, env: Any, observation: dict[str, Any]) -> np.ndarray:
        return expert_actions(observation)


class ReachStateAdapter(EmbodimentAdapter):
    """The reach arm's state for the expert server.

    Request: ``{"observation/target_pos": float64 (3,), "observation/joint_pos": float64 (3,),
    "prompt": str}``; reply ``{"actions": float32 (1, 3)}``.
    """

    action_dim = ACTION_DIM

    def extract(self, observation: dict[str, Any], env_id: int) -> tuple[np.ndarray, np.ndarray]:
        policy = observation["policy"]
        return np.asarray(policy["target_pos"][env_id]), np.asarray(policy["joint_pos"][env_id])

    def pack_request(self, extracted: tuple[np.ndarray, np.ndarray], instruction: str | None) -> dict[str, Any]:
        target, joints = extracted
        return {
            "observation/target_pos": np.asarray(target, np.float64).reshape(3),
            "observation/joint_pos": np.asarray(joints, np.float64).reshape(3),
            "prompt": instruction or "",
        }


class ReachExpertRemoteConfig(RemotePolicyConfig):
    embodiment: str = Field(
        "reach_arm", description="embodiment adapter name", validation_alias=AliasChoices("embodiment")
    )
    open_loop_horizon: int = Field(1, ge=1, description="chunk rows replayed per request (the expert is closed-loop)")


class ReachExpertRemotePolicy(RemoteChunkReplayPolicy):
    """The reach expert behind arena's policy server (``arena serve isaaclab-reach-expert``)."""

    name = "isaaclab_reach_expert_remote"
    Config = ReachExpertRemoteConfig
    adapter_family = "isaaclab_reach_expert"
    server_response_actions_key = "actions"


class ReachExpertModel:
    """The expert as a policy-server model (stateless; any number of envs and runs).

    Raises:
        ConfigError: from the constructor, for any option (it takes none).
        ValueError: from :meth:`infer`, for a request without 3 finite ``observation/target_pos``.
    """

    def __init__(self, **options: Any) -> None:
        if options:
            from arena.errors import ConfigError

            raise ConfigError(f"isaaclab-reach-expert takes no options, got {', '.join(sorted(options))}")

    def metadata(self) -> dict[str, Any]:
        return {"model": "isaaclab-reach-expert", "action_dim": ACTION_DIM}

    def load(self) -> None:
        """Nothing to load: the expert is closed-form."""

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        target = np.asarray(obs.get("observation/target_pos", ()), np.float64).reshape(-1)
        if target.shape != (3,) or not np.all(np.isfinite(target)):
            raise ValueError("request needs 'observation/target_pos': 3 finite floats (m)")
        return {"actions": reach(target).reshape(1, ACTION_DIM)}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.infer(obs) for obs in batch]


def reach_expert_server_task(config: ReachExpertRemoteConfig) -> ServerTask:
    """arena's own server hosting the expert: CPU only, starts in a second, shareable."""
    return arena_server_task("isaaclab-reach-expert")
