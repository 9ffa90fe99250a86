"""``pi0_remote``: the client of an openpi policy server (pi0 / pi0.5 checkpoints).

The server is openpi's own ``scripts/serve_policy.py`` (openpi websocket protocol,
``reference/protocols.md`` section 2); replies carry the chunk under ``actions``. The
adapter (``embodiment``, alias ``openpi_embodiment_adapter``) chooses what is sent and how
many chunk rows are replayed per request for the ``policy_variant``, unless
``open_loop_horizon`` is set.

Chunk length (the rows of every reply) is separate from the open-loop horizon (the rows
replayed): the adapter's table gives it for each published checkpoint (DROID: pi05 15, pi0
10; LIBERO: pi05 10, pi0 50; ALOHA: 50), ``chunk_length`` overrides it for a fine-tune, and
an embodiment without a table entry takes the first reply's length. A reply of another
length is a protocol violation naming both (a pi0 server behind a pi05 client is refused,
not evaluated under the wrong label).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, Field, model_validator

from arena.errors import ConfigError
from arena.policies.remote import ChunkLength, RemoteChunkReplayPolicy, RemotePolicyConfig

#: The openpi variants this client knows (pi0-FAST is left out: its DROID checkpoint
#: outputs joint velocities, not the joint positions the DROID adapter replays).
PolicyVariant = Literal["pi0", "pi05"]


class Pi0RemoteConfig(RemotePolicyConfig):
    """Options of ``policy: {type: pi0_remote, ...}``."""

    policy_variant: PolicyVariant = Field("pi05", description="pi05 (pi0.5) or pi0; selects horizon and checkpoint")
    embodiment: str = Field(
        "droid",
        description="openpi embodiment adapter: droid, libero or aloha",
        validation_alias=AliasChoices("embodiment", "openpi_embodiment_adapter"),
    )
    open_loop_horizon: int | None = Field(  # type: ignore[assignment]
        None, ge=1, description="chunk rows replayed per request; null = the adapter's value for the variant"
    )
    chunk_length: int | None = Field(
        None,
        ge=1,
        description="rows of every action chunk the server returns (set it for a fine-tune); null = the "
        "adapter's table for the variant, else the first reply's length",
    )
    first_request_timeout_s: float = Field(
        900.0, gt=0, description="seconds for the first inference on a connection (JAX compiles it)"
    )
    ping_timeout_s: float | None = Field(
        300.0, gt=0, description="seconds to wait for a pong (the server's loop blocks while it infers)"
    )

    @model_validator(mode="after")
    def _known_variant_for_builtin_adapter(self) -> Pi0RemoteConfig:
        from arena_openpi.adapters import OpenPIAlohaAdapter, OpenPIDroidAdapter, OpenPILiberoAdapter

        builtin = {"droid": OpenPIDroidAdapter, "libero": OpenPILiberoAdapter, "aloha": OpenPIAlohaAdapter}
        adapter = builtin.get(self.embodiment)
        if adapter is not None and self.policy_variant not in adapter.open_loop_horizon_by_variant:
            raise ValueError(
                f"the {self.embodiment} adapter has no horizon for policy_variant {self.policy_variant!r}"
            )
        if adapter is not None:  # what Pi0RemotePolicy refuses, said by `arena validate` already
            horizon = resolve_horizon(self, adapter)
            chunk = resolve_chunk_length(self, adapter)
            if chunk.expected is not None and horizon > chunk.expected:
                whose = "" if self.open_loop_horizon is not None else (
                    f" (the {self.embodiment} adapter's for {self.policy_variant})"
                )
                raise ValueError(
                    f"open_loop_horizon {horizon}{whose} exceeds chunk_length {chunk.expected} ({chunk.source}): "
                    "each request replays at most the rows of one chunk; lower open_loop_horizon or raise chunk_length"
                )
        return self


class Pi0RemotePolicy(RemoteChunkReplayPolicy):
    """openpi pi0 / pi0.5 behind openpi's websocket server.

    Raises:
        ConfigError: ``open_loop_horizon`` is unset and the adapter has no horizon for the
            variant.
    """

    name: ClassVar[str] = "pi0_remote"
    Config: ClassVar[type[Pi0RemoteConfig]] = Pi0RemoteConfig
    adapter_family: ClassVar[str] = "openpi"
    server_response_actions_key: ClassVar[str] = "actions"

    def __init__(self, config: Pi0RemoteConfig, adapter: Any = None) -> None:
        super().__init__(config, adapter)
        self.open_loop_horizon = resolve_horizon(config, self.adapter)
        self.chunk_length = resolve_chunk_length(config, self.adapter)
        expected = self.chunk_length.expected
        if expected is not None and self.open_loop_horizon > expected:
            raise ConfigError(
                f"open_loop_horizon {self.open_loop_horizon} exceeds the {expected} rows each chunk holds "
                f"({self.chunk_length.source})"
            )


def resolve_chunk_length(config: Pi0RemoteConfig, adapter: Any) -> ChunkLength:
    """The chunk length replies must have: ``config.chunk_length``, else the adapter's table
    for ``config.policy_variant``, else unknown (the first reply's length is then kept)."""
    if config.chunk_length is not None:
        return ChunkLength(config.chunk_length, "chunk_length in the policy config")
    table = getattr(adapter, "chunk_length_by_variant", {})
    if config.policy_variant in table:
        source = (
            f"openpi's {config.policy_variant} checkpoints for {config.embodiment}; "
            "set chunk_length for a fine-tune with another action horizon"
        )
        return ChunkLength(int(table[config.policy_variant]), source)
    return ChunkLength()


def resolve_horizon(config: Pi0RemoteConfig, adapter: Any) -> int:
    """``config.open_loop_horizon``, else the adapter's horizon for ``config.policy_variant``.

    Raises:
        ConfigError: neither gives a horizon.
    """
    if config.open_loop_horizon is not None:
        return config.open_loop_horizon
    table = getattr(adapter, "open_loop_horizon_by_variant", {})
    if config.policy_variant not in table:
        raise ConfigError(
            f"adapter '{config.embodiment}' has no horizon for policy_variant '{config.policy_variant}'; "
            "set open_loop_horizon"
        )
    return int(table[config.policy_variant])
