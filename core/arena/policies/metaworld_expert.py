"""``metaworld_expert_remote``: the client of the Meta-World expert reference server.

The server (``arena serve metaworld-expert``) hosts Meta-World's own scripted expert policies
and is stateless: the ``metaworld`` environment puts each env's task name in its observation
(``observation["task"]``), the adapter sends it with the state, so one server serves runs of
different tasks. The experts are closed-loop, so ``open_loop_horizon`` defaults to 1.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import AliasChoices, Field

from arena.policies.adapters import EmbodimentAdapter
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig
from arena.servertask import ServerTask, arena_server_task


class MetaWorldStateAdapter(EmbodimentAdapter):
    """Sawyer state adapter: sends the 39-dim Meta-World state and the task name.

    Request: ``{"observation/state": float64 (39,), "task": str, "prompt": str}``;
    reply: ``{"actions": float (H, 4)}`` (end-effector xyz delta and gripper, in [-1, 1]).
    """

    action_dim: ClassVar[int] = 4

    def extract(self, observation: dict[str, Any], env_id: int) -> tuple[np.ndarray, str]:
        return observation["policy"]["state"][env_id], observation["task"][env_id]

    def pack_request(self, extracted: tuple[np.ndarray, str], instruction: str | None) -> dict[str, Any]:
        state, task = extracted
        return {
            "observation/state": np.asarray(state, dtype=np.float64),
            "task": str(task),
            "prompt": instruction or "",
        }


class MetaWorldExpertRemoteConfig(RemotePolicyConfig):
    embodiment: str = Field(
        "metaworld",
        description="embodiment adapter name",
        validation_alias=AliasChoices("embodiment", "openpi_embodiment_adapter"),
    )
    open_loop_horizon: int = Field(1, ge=1, description="chunk rows replayed per request (experts are closed-loop)")
    connect_timeout_s: float = Field(60.0, gt=0, description="seconds to wait for a starting server")
    first_request_timeout_s: float = Field(60.0, gt=0, description="seconds for the first inference")
    request_timeout_s: float = Field(30.0, gt=0, description="seconds for every later inference")


class MetaWorldExpertRemotePolicy(RemoteChunkReplayPolicy):
    """Meta-World's scripted experts behind arena's policy server."""

    name = "metaworld_expert_remote"
    Config = MetaWorldExpertRemoteConfig
    adapter_family = "metaworld_expert"
    server_response_actions_key = "actions"


def metaworld_expert_server_task(config: MetaWorldExpertRemoteConfig) -> ServerTask:
    """The reference server: CPU only, quick to start, shareable between runs and envs."""
    return arena_server_task("metaworld-expert")
