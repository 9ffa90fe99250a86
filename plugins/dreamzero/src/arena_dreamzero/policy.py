"""``dreamzero_remote``: the client of a DreamZero world-action-model server.

The server is **single-tenant** (``reference/protocols.md`` section 4.4): it keeps one
observation history and resets it whenever the ``session_id`` changes. So a run uses one env
(:meth:`DreamZeroRemoteConfig.validate_run` refuses ``num_envs`` > 1; scale with more runs or
shards, each with its own server), and:

* every episode gets a new ``session_id`` (and an explicit ``reset``, acknowledged with the
  text frame ``reset successful``);
* a reconnect starts new sessions for every env and drops every cached chunk (the server's
  history is gone or belongs to the old session);
* the first request of a session sends one frame per camera; later ones send a
  ``(T, H, W, 3)`` stack taken at ``frame_offsets`` steps from now (DreamZero's own test
  client: ``[-23, -16, -8, 0]``, padded with the oldest frame at an episode's start);
* the reply's first ``open_loop_horizon`` (24) rows are replayed, then the next request goes
  (the rows and each episode's latency records wait in arena's
  :class:`~arena.policies.chunks.ChunkBroker`).

Connections, retries and give-up run on arena's
:class:`~arena.policies.connection.ConnectionLoop`; only the faults of the connection
(dropped, timed out, refused) are retried, a server traceback is not. Connecting waits up to
``connect_timeout_s`` (a 14B model loads and warms up for minutes);
reconnects wait ``reconnect_timeout_s``, and a reconnect that finds no server ends the
episode as an error at once (later episodes of the run check once, for ``recheck_timeout_s``).
A greeting after a reconnect must equal the first one (the protocol's only self-description);
another is an ``error`` naming what changed. The first inference after the server (re)started waits
``first_request_timeout_s``; after a reconnect to a server that stayed up, ``request_timeout_s``
(bound: :meth:`~arena.policies.remote.RemotePolicyConfig.give_up_bound_s`).
"""

from __future__ import annotations

import inspect
import uuid
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import AliasChoices, Field, field_validator

from arena.errors import PolicyError, TransportError
from arena.policies.adapters import ProtocolViolation
from arena.policies.chunks import ChunkBroker
from arena.policies.connection import ConnectionGaveUp, ConnectionLoop
from arena.policies.remote import RemotePolicyConfig, SingleConnectionPolicy
from arena.transport.errors import ConnectionLost, HandshakeError, RequestTimeout, ServerUnavailable

from arena_dreamzero.adapters import DreamZeroAdapter
from arena_dreamzero.client import DreamZeroClient, ServerConfig

if TYPE_CHECKING:
    from arena.envs.base import Environment

__all__ = ["DreamZeroRemoteConfig", "DreamZeroRemotePolicy"]

_RETRYABLE = (ConnectionLost, RequestTimeout, ServerUnavailable, HandshakeError)


class DreamZeroRemoteConfig(RemotePolicyConfig):
    """Settings of a DreamZero client and of the server task derived from it."""

    remote_port: int = Field(5000, ge=1, le=65535, description="DreamZero server port")
    embodiment: str = Field(
        "droid",
        description="DreamZero embodiment adapter name (registered in family 'dreamzero')",
        validation_alias=AliasChoices("embodiment", "dreamzero_embodiment_adapter"),
    )
    open_loop_horizon: int = Field(24, ge=1, description="chunk rows replayed per request (DreamZero-DROID predicts 24)")
    connect_timeout_s: float = Field(
        1800.0, gt=0, description="seconds the first connection waits for a server that is loading its model"
    )
    first_request_timeout_s: float = Field(900.0, gt=0, description="seconds for the first inference (warm-up takes minutes)")
    request_timeout_s: float = Field(120.0, gt=0, description="seconds for every later inference (about 3 s on an H100)")
    ping_interval_s: float | None = Field(60.0, gt=0, description="seconds between keepalive pings; null = off")
    ping_timeout_s: float | None = Field(300.0, gt=0, description="seconds to wait for a pong; null = forever")
    cam2_source: Literal["right", "black", "duplicate"] = Field(
        "right", description="second exterior image: external_camera_2_rgb, black, or the first camera again"
    )
    frame_offsets: list[int] = Field(
        default_factory=lambda: [-23, -16, -8, 0],
        description="steps (<= 0, ascending, ending at 0) of the frames sent after a session's first request; [0] = one frame",
    )
    # -- the server task ------------------------------------------------------------------
    model_path: str = Field("/workspace/checkpoints/DreamZero-DROID", description="checkpoint directory the server loads")
    server_image: str | None = Field(None, description="container image of the DreamZero server")
    server_repo_dir: str = Field("/workspace/dreamzero", description="DreamZero checkout the server command runs in")
    server_gpus: int = Field(1, ge=1, description="GPUs (torchrun processes) of the server")

    @field_validator("frame_offsets")
    @classmethod
    def _offsets(cls, value: list[int]) -> list[int]:
        if not value or value[-1] != 0 or any(v > 0 for v in value) or value != sorted(set(value)):
            raise ValueError(f"frame_offsets must be distinct, ascending, <= 0 and end with 0; got {value}")
        return value

    def validate_run(self, run: Any) -> None:
        """Refuse ``num_envs`` > 1: the server keeps one observation history.

        Raises:
            ValueError: the run asks for several envs.
        """
        n = run.environment_builder.num_envs
        if n > 1:
            raise ValueError(
                f"dreamzero_remote needs environment_builder.num_envs: 1 (got {n}): a DreamZero server is "
                "single-tenant (one observation history, reset on every new session_id), so envs would corrupt "
                "each other's context; scale with more runs or shards instead, each gets its own server"
            )


class DreamZeroRemotePolicy(SingleConnectionPolicy):
    """DreamZero over its RoboArena-style websocket protocol; one session per env episode."""

    name: ClassVar[str] = "dreamzero_remote"
    Config: ClassVar[type] = DreamZeroRemoteConfig
    adapter_family: ClassVar[str] = "dreamzero"

    def __init__(self, config: DreamZeroRemoteConfig, adapter: DreamZeroAdapter | None = None) -> None:
        super().__init__(config)
        self.config: DreamZeroRemoteConfig = config
        self.adapter = adapter if adapter is not None else self._make_adapter()
        self.client: DreamZeroClient | None = None
        self.loop: ConnectionLoop[DreamZeroClient] | None = None
        self.server: ServerConfig = ServerConfig()
        self.num_envs = 0
        self.session_ids: list[str] = []
        self._session_requests: list[int] = []
        self.broker: ChunkBroker | None = None  # built in start(), when num_envs is known
        self._history: list[deque[dict[str, np.ndarray]]] = []
        self._greeting: dict[str, Any] | None = None

    def _make_adapter(self) -> DreamZeroAdapter:
        from arena.plugins import get_registry

        cls = get_registry().adapter(self.adapter_family, self.config.embodiment)
        accepts_cam2 = "cam2_source" in inspect.signature(cls).parameters
        return cls(cam2_source=self.config.cam2_source) if accepts_cam2 else cls()

    # -- connection -----------------------------------------------------------------------
    def _on_connect(self, client: DreamZeroClient) -> None:
        """Read the greeting; refuse a server that does not predict joint positions.

        Raises:
            ProtocolViolation: another action space (the loop closes the connection: a retry
                must never infer against it).
        """
        self._greeting = client.metadata
        self.server = client.server_config
        if self.server.action_space != "joint_position":
            raise ProtocolViolation(
                f"the server predicts {self.server.action_space}; embodiment '{self.config.embodiment}' needs joint_position"
            )

    def _on_fault(self, fault: BaseException) -> None:
        """The connection is re-opened: every env starts a new session (the server's history
        is gone or belongs to the old one), dropping its chunk."""
        for i in range(self.num_envs):
            self._new_session(i)

    def _new_session(self, env_id: int) -> None:
        """A new ``session_id`` for ``env_id``; the chunk of its old session is dropped."""
        self.session_ids[env_id] = str(uuid.uuid4())
        self._session_requests[env_id] = 0
        assert self.broker is not None
        self.broker.discard([env_id])

    def start(self, env: Environment) -> None:
        """Connect (waiting up to ``connect_timeout_s``) and read the greeting.

        Raises:
            PolicyError: more than one env, no server, or a server that does not predict
                joint positions.
        """
        if env.num_envs != 1:
            raise PolicyError(
                f"dreamzero_remote drives one env per server (got {env.num_envs}); use more runs or shards"
            )
        self.num_envs = env.num_envs
        self.session_ids = [""] * self.num_envs
        self._session_requests = [0] * self.num_envs
        self.broker = ChunkBroker(
            self.num_envs, self.config.open_loop_horizon, self.adapter.action_dim, active=self.active_envs
        )
        depth = 1 - min(self.config.frame_offsets)
        self._history = [deque(maxlen=depth) for _ in range(self.num_envs)]
        c = self.config
        self.client = DreamZeroClient(c.remote_host, c.remote_port, **c.client_options())
        self.loop = c.connection_loop(
            self.client, retryable=lambda exc: isinstance(exc, _RETRYABLE), on_connect=self._on_connect, on_fault=self._on_fault
        )
        try:
            self.loop.connect(c.connect_timeout_s)
        except TransportError as exc:
            raise PolicyError(f"cannot connect to the DreamZero server: {exc}") from exc
        for i in range(self.num_envs):
            self._new_session(i)

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """New session for each of ``env_ids`` and an explicit server ``reset`` (best effort:
        a failed reset leaves the connection to be re-opened by the next request)."""
        if self.client is None or self.broker is None:
            return
        ids = list(range(self.num_envs) if env_ids is None else env_ids)
        self.broker.reset(ids)  # the episode's chunk and latency records
        for i in ids:
            self._new_session(i)
            self._history[i].clear()
        if self.client.connected:  # one server, one history: one reset whatever the env ids
            first = ids[0] if ids else 0
            try:
                self.client.start_episode(first, {"session_id": self.session_ids[first]})
            except TransportError:
                self.client.close()

    def set_active(self, env_ids: Sequence[int]) -> None:
        """Only ``env_ids`` run episodes: idle envs send no request and take no chunk rows."""
        super().set_active(env_ids)
        if self.broker is not None:
            self.broker.set_active(self.active_envs or ())

    # -- the step loop --------------------------------------------------------------------
    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        """``float32 (1, 8)``: the next row of the env's chunk, requesting one when due.

        Raises:
            PolicyError: no chunk after ``max_reconnect_attempts`` reconnects, a server
                traceback, or a protocol violation (the env's episode is an error).
        """
        if self.client is None or self.broker is None:
            raise PolicyError("get_action called before start()")
        broker = self.broker
        active = np.flatnonzero(broker.active).tolist()  # idle envs send nothing
        for i in active:
            try:
                self._history[i].append(self.adapter.frames(observation, i))
            except ProtocolViolation as exc:
                raise PolicyError(str(exc), env_ids=[i]) from exc
        for i in active:
            if broker.due()[i]:  # checked env by env: a reconnect during one fetch drops every chunk
                self._fetch(i, observation)
        # The dtype actions reach the simulator in (the adapter's chunks are float32 already).
        out = np.zeros((self.num_envs, self.adapter.action_dim), np.float32)
        return broker.take(broker.active, out=out)

    def _frames_for_request(self, env_id: int) -> dict[str, np.ndarray]:
        history = self._history[env_id]
        if self._session_requests[env_id] == 0 or self.config.frame_offsets == [0]:
            return dict(history[-1])
        last = len(history) - 1
        picks = [history[max(0, last + off)] for off in self.config.frame_offsets]
        return {key: np.stack([p[key] for p in picks]) for key in picks[-1]}

    def _fetch(self, env_id: int, observation: dict[str, Any]) -> None:
        c = self.config
        try:
            state = self.adapter.state(observation, env_id)
        except ProtocolViolation as exc:
            raise PolicyError(str(exc), env_ids=[env_id]) from exc

        def send(client: DreamZeroClient) -> np.ndarray:
            # built per attempt: a reconnect starts a new session (and so a one-frame request)
            request = self.adapter.pack_request(
                self._frames_for_request(env_id), state, self.task_description, self.session_ids[env_id],
                self.server.image_resolution,
            )
            return self.adapter.unpack_actions(client.infer(request), c.open_loop_horizon)

        assert self.loop is not None
        try:
            chunk, latency_ms = self.loop.call(send)
        except ConnectionGaveUp as exc:
            raise PolicyError(f"DreamZero server: {exc}", env_ids=[env_id]) from exc
        except TransportError as exc:  # ServerError (traceback), ProtocolError, ProtocolViolation
            raise PolicyError(f"{type(exc).__name__}: {exc}", env_ids=[env_id]) from exc
        assert self.broker is not None
        self.broker.put([env_id], chunk, latency_ms=latency_ms)
        self._session_requests[env_id] += 1

    def server_metadata(self) -> dict[str, Any] | None:
        """The server's greeting (RoboArena ``PolicyServerConfig``), as last received."""
        return self._greeting

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The episode's session id, its session's request count and the episode's request
        latencies (:meth:`ChunkBroker.episode_info`)."""
        if self.broker is None or not 0 <= env_id < len(self.session_ids):
            return {}
        out: dict[str, Any] = {"dreamzero": {"session_id": self.session_ids[env_id], "requests": self._session_requests[env_id]}}
        return out | self.broker.episode_info(env_id)

    def close(self) -> None:
        """Reset the server's history (best effort) and disconnect; the server keeps running."""
        client, self.client = self.client, None
        if client is None:
            return
        if client.connected:
            try:
                client.reset_server()
            except TransportError:
                pass
        client.close()
