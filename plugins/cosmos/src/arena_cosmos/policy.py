"""``cosmos_remote``: the client of Cosmos3-Edge-Policy-DROID's robolab action-policy server.

That server speaks the openpi websocket protocol (``reference/isaaclab-arena.md`` section
3.2) and differs from openpi's in two ways the client cares about: the chunk is under the
singular key ``action`` (32 rows of 8), and the horizon comes from this config (default 16
of the 32 rows, which Arena found to work better than replaying all of them).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import AliasChoices, Field

from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig

#: Rows of every chunk the Cosmos DROID server returns (its ``action_chunk_size``).
COSMOS_CHUNK_ROWS = 32


class CosmosRemoteConfig(RemotePolicyConfig):
    """Options of ``policy: {type: cosmos_remote, ...}``."""

    embodiment: str = Field(
        "droid",
        description="cosmos embodiment adapter (droid)",
        validation_alias=AliasChoices("embodiment", "cosmos_embodiment_adapter"),
    )
    open_loop_horizon: int = Field(
        16, ge=1, le=COSMOS_CHUNK_ROWS, description="chunk rows replayed per request (the server returns 32)"
    )
    first_request_timeout_s: float = Field(
        900.0, gt=0, description="seconds for the first inference on a connection (checkpoint load, compile)"
    )
    ping_timeout_s: float | None = Field(
        300.0, gt=0, description="seconds to wait for a pong (the server's loop blocks while it infers)"
    )


class CosmosRemotePolicy(RemoteChunkReplayPolicy):
    """Cosmos3-Edge-Policy-DROID behind its openpi-protocol server."""

    name: ClassVar[str] = "cosmos_remote"
    Config: ClassVar[type[CosmosRemoteConfig]] = CosmosRemoteConfig
    adapter_family: ClassVar[str] = "cosmos"
    server_response_actions_key: ClassVar[str] = "action"
