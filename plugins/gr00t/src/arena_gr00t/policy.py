"""``gr00t_remote``: the client of a GR00T policy server (ZeroMQ, N1.5 or N1.6).

Per step the action scheduler (``chunk`` or ``synced_batch``) decides whether a chunk is
due; a fetch sends **one** batched request holding every env's observation (mapped from the
server's modality config by the embodiment adapter) and maps the reply's action groups back
into the simulator's action slots. The rows, and each env's latency records, wait in the
scheduler's :class:`~arena.policies.chunks.ChunkBroker`.

Wire modes (``wire_generation``): ``n1.6`` (nested observation inside ``{observation,
options}``, reply ``[action, info]``), ``n1.6-sim`` (a server started with
``--use-sim-policy-wrapper``: flat ``video.<camera>`` / ``state.<group>`` keys and the
language key as ``[text] * N`` inside ``{observation, options}``, reply ``[{"action.<group>":
...}, info]``) and ``n1.5`` (the flat observation itself as ``data``, reply the action map).

Faults (arena's :class:`~arena.policies.connection.ConnectionLoop` around the one
:class:`~arena_gr00t.client.Gr00tClient`): a request that times out, hits a ZeroMQ error or
finds the server's port closed recreates the REQ socket and drops every env's buffered chunk;
the client then waits up to ``reconnect_timeout_s`` for the server to answer ``ping`` again
(none: the envs that needed a chunk end their episodes as ``error`` at once, and later
reconnects of the run wait only ``recheck_timeout_s``) and retries, at most
``max_reconnect_attempts`` times. After every reconnect the client asks for the modality
config again (with ``use_server_modality``; else it compares the ``ping`` reply): a server
that came back with another embodiment or modality configuration ends the episodes as
``error`` naming what changed, before any ``get_action``. Only a server that restarted meanwhile gets
``first_request_timeout_s`` again; one that stayed up gets ``request_timeout_s``. A killed
server is noticed within about 2 s even during a long wait, so it becomes an error episode
after about ``reconnect_timeout_s`` (bound: ``RemotePolicyConfig.give_up_bound_s``). An
``{"error": ...}`` reply or a malformed one is not retried (the same request would fail again).

GR00T's own ``run_gr00t_server.py`` passes no ``api_token`` to its server, so the servers
arena starts are unauthenticated; ``api_key_env`` is for servers started with a token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import AliasChoices, Field, model_validator

from arena.errors import PolicyError, TransportError
from arena.policies.adapters import ProtocolViolation
from arena.policies.remote import RemotePolicyConfig, SingleConnectionPolicy
from arena.policies.connection import ConnectionGaveUp, ConnectionLoop

from arena_gr00t.adapters import DROID_MODALITY, Gr00tAdapter
from arena_gr00t.client import Gr00tClient, Gr00tServerError
from arena_gr00t.schedulers import SCHEDULERS, ActionScheduler, Fetched, make_scheduler

if TYPE_CHECKING:
    from arena.envs.base import Environment

__all__ = ["Gr00tRemoteConfig", "Gr00tRemotePolicy"]


class Gr00tRemoteConfig(RemotePolicyConfig):
    """Settings of a GR00T client and of the server task derived from it."""

    remote_port: int = Field(5555, ge=1, le=65535, description="GR00T server port")
    embodiment: str = Field(
        "droid",
        description="GR00T embodiment adapter name (registered in family 'gr00t')",
        validation_alias=AliasChoices("embodiment", "gr00t_embodiment_adapter"),
    )
    wire_generation: Literal["n1.6", "n1.6-sim", "n1.5"] = Field(
        "n1.6",
        description="n1.6: nested observation in {observation, options}, reply [action, info]; n1.6-sim: a server "
        "started with --use-sim-policy-wrapper (flat video./state. keys in {observation, options}); n1.5: flat "
        "observation, reply action map",
    )
    scheduler: Literal["chunk", "synced_batch"] = Field(
        "chunk", description="action scheduler: chunk (fetch when any env is due) or synced_batch (when all are; hold the others)"
    )
    open_loop_horizon: int = Field(
        32,
        ge=1,
        description="chunk rows executed per request (GR00T's action_chunk_length)",
        validation_alias=AliasChoices("open_loop_horizon", "action_chunk_length"),
    )
    target_image_size: tuple[int, int] = Field((180, 320), description="[height, width] images are letterboxed to (pixels)")
    use_server_modality: bool = Field(
        True, description="read keys and horizons from get_modality_config; false: the adapter's built-in DROID modality"
    )
    # -- the server task ------------------------------------------------------------------
    model_path: str = Field("nvidia/GR00T-N1.6-DROID", description="checkpoint path or hub id the server loads")
    embodiment_tag: str = Field("OXE_DROID", description="GR00T embodiment tag passed to the server")
    server_image: str | None = Field(
        None,
        description="container image of the GR00T server (none is public: build one from Isaac-GR00T's Dockerfile)",
    )
    server_repo_dir: str = Field("/workspace", description="Isaac-GR00T checkout the server command runs in")
    connect_timeout_s: float = Field(600.0, gt=0, description="seconds to wait for the server's first ping answer")

    @model_validator(mode="after")
    def _check(self) -> Gr00tRemoteConfig:
        h, w = self.target_image_size
        if h < 1 or w < 1:
            raise ValueError(f"target_image_size must be positive [height, width]; got {list(self.target_image_size)}")
        if self.scheduler not in SCHEDULERS:  # pragma: no cover - Literal already checks
            raise ValueError(f"unknown scheduler {self.scheduler!r}")
        return self


class Gr00tRemotePolicy(SingleConnectionPolicy):
    """GR00T over its native ZeroMQ protocol; one batched request for all envs."""

    name: ClassVar[str] = "gr00t_remote"
    Config: ClassVar[type] = Gr00tRemoteConfig
    adapter_family: ClassVar[str] = "gr00t"

    def __init__(self, config: Gr00tRemoteConfig) -> None:
        super().__init__(config)
        self.config: Gr00tRemoteConfig = config
        self.client: Gr00tClient | None = None
        self.loop: ConnectionLoop[Gr00tClient] | None = None
        self.adapter: Gr00tAdapter | None = None
        self.scheduler: ActionScheduler | None = None
        self.num_envs = 0
        self._modality: dict[str, Any] | None = None

    def _adapter_cls(self) -> type[Gr00tAdapter]:
        from arena.plugins import get_registry

        return get_registry().adapter(self.adapter_family, self.config.embodiment)

    def start(self, env: Environment) -> None:
        """Wait for the server, read its modality config, build the adapter and the scheduler.

        Raises:
            PolicyError: the server never answered, refused the token, or serves a modality
                the adapter cannot map, or an action size other than the env's.
        """
        c = self.config
        self.num_envs = env.num_envs
        self.client = Gr00tClient(
            c.remote_host,
            c.remote_port,
            api_token=c.api_key(),
            connect_timeout_s=c.connect_timeout_s,
            request_timeout_s=c.request_timeout_s,
            first_request_timeout_s=c.first_request_timeout_s,
            generation=c.wire_generation,
        )
        # identity: the modality config (embodiment, keys, horizons), asked again after every
        # reconnect; a server that came back with another is refused (ServerChanged)
        identity = {"identity": Gr00tClient.get_modality_config} if c.use_server_modality else {}
        self.loop = c.connection_loop(self.client, on_fault=self._on_fault, **identity)
        try:
            self.loop.connect()
            modality = self.loop.server_identity if c.use_server_modality else {}
            self._modality = modality
            self.adapter = self._adapter_cls()(modality or DROID_MODALITY, c.target_image_size)
        except TransportError as exc:
            raise PolicyError(f"GR00T server {self.client.endpoint}: {exc}") from exc
        action_dim = int(np.prod(env.action_space.shape))
        if self.adapter.action_dim != action_dim:
            raise PolicyError(
                f"embodiment '{c.embodiment}' produces {self.adapter.action_dim}-dim actions; the environment takes {action_dim}"
            )
        if self.adapter.action_horizon and self.adapter.action_horizon < c.open_loop_horizon:
            raise PolicyError(
                f"the model predicts {self.adapter.action_horizon} steps; open_loop_horizon "
                f"{c.open_loop_horizon} must not exceed it"
            )
        self.scheduler = make_scheduler(c.scheduler, self.num_envs, c.open_loop_horizon, action_dim)
        if self.active_envs is not None:
            self.scheduler.set_active(sorted(self.active_envs))
        if c.wire_generation != "n1.5":
            try:
                self.client.reset()
            except TransportError as exc:
                raise PolicyError(f"GR00T server {self.client.endpoint}: reset failed: {exc}") from exc

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """Drop the chunks and latency records of ``env_ids``. GR00T's server state is shared
        by all envs, so nothing is sent per env (``reset`` went to the server once, in
        :meth:`start`)."""
        if self.scheduler is None:
            return
        self.scheduler.reset(env_ids)

    def set_active(self, env_ids: list[int]) -> None:
        """Only ``env_ids`` run episodes: idle envs never make the scheduler fetch."""
        super().set_active(env_ids)
        if self.scheduler is not None:
            self.scheduler.set_active(sorted(self.active_envs or ()))

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        """``float32 (num_envs, 8)``: the scheduler's rows, fetching one batched chunk when an
        active env is due (the request still carries every env's observation: one batch).

        Raises:
            PolicyError: no chunk after the retries, an error reply or a protocol violation;
                ``env_ids`` are the envs that needed a chunk.
        """
        if self.scheduler is None or self.adapter is None:
            raise PolicyError("get_action called before start()")
        hold = self.adapter.hold_action(observation) if self.scheduler.needs_hold else None
        return self.scheduler.get_action(lambda: self._fetch(observation), hold)

    def _fetch(self, observation: dict[str, Any]) -> Fetched:
        assert self.client is not None and self.adapter is not None and self.scheduler is not None
        c = self.config
        try:
            request = self.adapter.observation(observation, self.task_description, flat=c.wire_generation != "n1.6")
        except ProtocolViolation as exc:
            raise PolicyError(f"cannot build the GR00T observation: {exc}", env_ids=self._due()) from exc
        n, horizon = self.num_envs, c.open_loop_horizon

        def send(client: Gr00tClient) -> np.ndarray:
            action, _info = client.infer(request)
            return self.adapter.actions_from_reply(action, n, horizon)

        assert self.loop is not None
        try:
            chunk, latency_ms = self.loop.call(send)
        except ConnectionGaveUp as exc:
            raise PolicyError(f"GR00T server: {exc}", env_ids=self._due()) from exc
        except Gr00tServerError as exc:
            raise PolicyError(f"GR00T server error: {exc}", env_ids=self._due()) from exc
        except TransportError as exc:  # ProtocolError, ProtocolViolation, CodecError
            raise PolicyError(f"protocol violation from {self.client.endpoint}: {exc}", env_ids=self._due()) from exc
        # the scheduler records the latency for every env that takes the new rows
        return Fetched(chunk, latency_ms=latency_ms)

    def _on_fault(self, fault: BaseException) -> None:
        """The socket was recreated: never replay a stale chunk."""
        assert self.scheduler is not None
        self.scheduler.invalidate()

    def _due(self) -> list[int]:
        assert self.scheduler is not None
        return [int(i) for i in np.flatnonzero(self.scheduler.needs_chunk())]

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """Latency of the batched requests that served this env's episode, and held steps."""
        if self.scheduler is None or not 0 <= env_id < self.num_envs:
            return {}
        out: dict[str, Any] = {"gr00t": {"requests": int(self.scheduler.requests[env_id]), "held_steps": int(self.scheduler.held_steps[env_id])}}
        return out | self.scheduler.broker.episode_info(env_id)

    def server_metadata(self) -> dict[str, Any] | None:
        """The server's modality config (keys and horizons), when it was asked for one."""
        if not self._modality:
            return None
        return {
            "modality": {
                name: {"delta_indices": list(m.delta_indices), "modality_keys": list(m.modality_keys)}
                for name, m in self._modality.items()
            }
        }

    def close(self) -> None:
        """Close the socket (``LINGER=0``: never blocks); the server keeps running."""
        if self.client is not None:
            self.client.close()
            self.client = None
