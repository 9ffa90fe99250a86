"""Remote policies: ``RemotePolicyConfig`` and ``RemoteChunkReplayPolicy``.

A remote policy is a thin client of a policy server speaking the openpi websocket protocol
(docs/architecture.md, "Inside the simulation process"). Per env it requests an action chunk ``(H, action_dim)``, replays
its first ``open_loop_horizon`` rows one per step, then requests again; the rows wait in a
:class:`~arena.policies.chunks.ChunkBroker`, which also keeps each env's latency records.

Connections: one per env, all opened in :meth:`RemoteChunkReplayPolicy.start` (not lazily: an
openpi server runs inference on its event loop, so a handshake made while another env's first
inference blocks it would time out; openpi issue 717). Requests of envs due on the same step
go out concurrently, each connection strictly one request, one reply.

Reconnects (:class:`~arena.policies.connection.ConnectionLoop`, one per env): a dropped
connection is re-opened with backoff, at most ``max_reconnect_attempts`` times per request;
every cached chunk of every env is discarded on a reconnect, so a stale chunk is never
replayed against a server that may have lost its state. After a reconnect the server's
metadata must equal the first connect's (else :class:`~arena.policies.connection.ServerChanged`:
the envs' episodes are ``error``, naming what changed); once a reconnect found no server,
the loops of every env share that (:class:`~arena.policies.connection.ServerWatch`) and later
reconnects wait only ``recheck_timeout_s``. The wire protocol is ``client_cls``
(a :class:`~arena.transport.interface.WireClient`; openpi's websocket by default).

Give-up time (how long a fault takes to become an ``error`` episode; see
:meth:`RemotePolicyConfig.give_up_bound_s`): a server process that dies closes its sockets,
so the client notices at once, then waits ``reconnect_timeout_s`` for a server to accept
connections again; if none does, the episode is an error. A server that answers again after
refusing connections was restarted and gets ``first_request_timeout_s`` for its first
inference; one that never went away gets ``request_timeout_s``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import AliasChoices, Field, field_validator

from arena.errors import ArenaError, ObservationError, PolicyError, TransportError
from arena.policies.adapters import EmbodimentAdapter, ProtocolViolation
from arena.policies.base import PolicyBase, PolicyConfig
from arena.policies.chunks import ChunkBroker
from arena.policies.connection import BACKOFF_MAX_S, RECHECK_TIMEOUT_S, ConnectionLoop, ServerWatch
from arena.transport.client import PolicyClient
from arena.transport.errors import CodecError, ProtocolError
from arena.transport.interface import WireClient

if TYPE_CHECKING:
    from arena.envs.base import Environment


class RemotePolicyConfig(PolicyConfig):
    """Connection settings shared by every remote client (openpi, Cosmos, GR00T, DreamZero)."""

    remote_host: str = Field("127.0.0.1", description="policy server host (or a ws:// / wss:// URI)")
    remote_port: int = Field(8000, ge=1, le=65535, description="policy server port")
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the API key or token (never the value)"
    )
    connect_timeout_s: float = Field(
        120.0, gt=0, description="seconds to wait for a server that is still starting"
    )
    reconnect_timeout_s: float = Field(
        120.0, gt=0, description="seconds a reconnect waits for a server that went away; none back: the episode is an error"
    )
    recheck_timeout_s: float = Field(
        RECHECK_TIMEOUT_S, gt=0,
        description="seconds a reconnect waits once an earlier reconnect of this run found no server "
        "(capped at reconnect_timeout_s): a dead server costs one reconnect_timeout_s per run, not per episode",
    )
    first_request_timeout_s: float = Field(
        600.0, gt=0, description="seconds for the first inference after the server (re)started (it may compile)"
    )
    request_timeout_s: float = Field(60.0, gt=0, description="seconds for every later inference")
    ping_interval_s: float | None = Field(30.0, gt=0, description="seconds between keepalive pings; null = off")
    ping_timeout_s: float | None = Field(300.0, gt=0, description="seconds to wait for a pong; null = forever")
    max_reconnect_attempts: int = Field(3, ge=0, description="reconnects per request before the episode is an error")
    policy_device: str = Field("cpu", description="where actions are handed to the simulator")
    embodiment: str = Field(
        description="embodiment adapter name, e.g. droid",
        validation_alias=AliasChoices(
            "embodiment",
            "openpi_embodiment_adapter",
            "cosmos_embodiment_adapter",
            "dreamzero_embodiment_adapter",
        ),
    )
    open_loop_horizon: int = Field(1, ge=1, description="chunk rows replayed before the next request")
    concurrent_requests: bool = Field(
        True,
        description="send the requests of envs due on the same step concurrently (one per connection); "
        "false sends them one after another",
    )

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        from arena.servertask import require_env_name

        return None if value is None else require_env_name(value, "api_key_env")

    def give_up_bound_s(self) -> float:
        """Worst-case seconds from a fault to the ``error`` episode, for one request.

        ``first_request_timeout_s`` for the request in flight, then per reconnect attempt (at
        most ``max_reconnect_attempts``) a back-off of at most 2 s, ``reconnect_timeout_s`` to
        reach the server and, if it restarted, ``first_request_timeout_s`` for its warm-up. A
        server that died and stays down costs only about ``reconnect_timeout_s``, and every
        later episode of the run about ``recheck_timeout_s``; one that is up but hung
        ``request_timeout_s`` per attempt (it is not warming up again).
        """
        attempt = BACKOFF_MAX_S + self.reconnect_timeout_s + self.first_request_timeout_s
        return self.first_request_timeout_s + self.max_reconnect_attempts * attempt

    def connection_loop(self, client: WireClient, **callbacks: Any) -> ConnectionLoop:
        """A :class:`~arena.policies.connection.ConnectionLoop` around ``client`` with these
        settings' ``reconnect_timeout_s``, ``recheck_timeout_s`` and ``max_reconnect_attempts``;
        ``callbacks`` are its ``retryable``, ``on_connect``, ``on_fault``, ``identity`` and
        ``watch`` (one :class:`~arena.policies.connection.ServerWatch` for all of a policy's
        loops)."""
        return ConnectionLoop(
            client, reconnect_timeout_s=self.reconnect_timeout_s, recheck_timeout_s=self.recheck_timeout_s,
            max_reconnect_attempts=self.max_reconnect_attempts, **callbacks,
        )

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~arena.transport.PolicyClient` (and its subclasses)
        from these settings, the key read from ``api_key_env``."""
        return {
            "api_key": self.api_key(),
            "connect_timeout_s": self.connect_timeout_s,
            "request_timeout_s": self.request_timeout_s,
            "first_request_timeout_s": self.first_request_timeout_s,
            "ping_interval_s": self.ping_interval_s,
            "ping_timeout_s": self.ping_timeout_s,
        }

    def api_key(self) -> str | None:
        """The key read from the variable named by ``api_key_env``.

        Raises:
            ArenaError: ``api_key_env`` names a variable that is not set.
        """
        if not self.api_key_env:
            return None
        value = os.environ.get(self.api_key_env)
        if value is None:
            raise ArenaError(
                f"api_key_env names {self.api_key_env}, which is not set in this environment"
            )
        return value


class SingleConnectionPolicy(PolicyBase):
    """Base of remote policies with one connection for all envs (GR00T's batched requests,
    DreamZero's single-tenant session): ``loop`` (a
    :class:`~arena.policies.connection.ConnectionLoop`, made in ``start`` from
    :meth:`RemotePolicyConfig.connection_loop`) and the reconnects it made."""

    loop: ConnectionLoop | None = None

    @property
    def is_remote(self) -> bool:
        return True

    @property
    def reconnects(self) -> int:
        """Reconnects that succeeded (kept after ``close``)."""
        return 0 if self.loop is None else self.loop.reconnects


class ChunkLength:
    """The rows every action chunk from one server must have.

    ``expected`` is known in advance (a model's published horizon) or ``None``: then the
    first reply's length is taken and any later change is refused, so a client never runs on
    against a server that started answering for another model. Thread-safe (envs fetch
    concurrently). ``source`` says where ``expected`` comes from, for the error message.
    """

    def __init__(self, expected: int | None = None, source: str = "") -> None:
        self.expected = expected
        self.source = source
        self._lock = threading.Lock()

    def check(self, rows: int, key: str) -> None:
        """Accept a chunk of ``rows`` rows under reply key ``key``.

        Raises:
            ProtocolViolation: ``rows`` differs from the expected (or first seen) length;
                the message names both.
        """
        with self._lock:
            if self.expected is None:
                self.expected = rows
                self.source = "the server's first reply"
                return
            if rows != self.expected:
                raise ProtocolViolation(
                    f"'{key}' has {rows} rows; expected {self.expected} ({self.source})"
                )


class RemoteChunkReplayPolicy(PolicyBase):
    """Chunk-replaying client of an openpi-protocol policy server.

    Subclasses set ``name``, ``Config`` (a :class:`RemotePolicyConfig`), ``adapter_family``
    (the registry family of their embodiment adapters, e.g. ``"openpi"``) and
    ``server_response_actions_key`` (``"actions"`` for openpi, ``"action"`` for Cosmos), and
    may set :attr:`chunk_length` (a :class:`ChunkLength`) to refuse chunks of another length.
    """

    Config: ClassVar[type[PolicyConfig]] = RemotePolicyConfig
    adapter_family: ClassVar[str] = ""
    server_response_actions_key: ClassVar[str] = "actions"
    #: The wire protocol: a :class:`~arena.transport.interface.WireClient` built as
    #: ``client_cls(remote_host, remote_port, **config.client_options())``.
    client_cls: ClassVar[type[WireClient]] = PolicyClient
    #: Whether a reconnect compares the server's metadata (openpi's metadata frame, vla-eval's
    #: HELLO) with the first connect's and refuses another server
    #: (:class:`~arena.policies.connection.ServerChanged`); False for a protocol whose
    #: server says nothing about itself (OpenVLA's ``deploy.py``).
    checks_server_identity: ClassVar[bool] = True

    def __init__(self, config: RemotePolicyConfig, adapter: EmbodimentAdapter | None = None) -> None:
        super().__init__(config)
        self.config: RemotePolicyConfig = config
        self.adapter = adapter if adapter is not None else self.make_adapter(config)
        self.open_loop_horizon = config.open_loop_horizon
        self._clients: list[WireClient] = []
        self._loops: list[ConnectionLoop] = []
        self.broker: ChunkBroker | None = None  # built in start(), when num_envs is known
        self._pool: ThreadPoolExecutor | None = None
        self._metadata: dict[str, Any] | None = None
        self.chunk_length: ChunkLength | None = None
        # per env, this episode's: requests sent, steps served, and (request, step) of each reconnect
        self._episode_requests: list[int] = []
        self._episode_steps: list[int] = []
        self._episode_reconnects: list[list[tuple[int, int]]] = []

    @classmethod
    def make_adapter(cls, config: RemotePolicyConfig) -> EmbodimentAdapter:
        """Instantiate the adapter registered as ``(adapter_family, config.embodiment)``."""
        from arena.plugins import get_registry

        return get_registry().adapter(cls.adapter_family, config.embodiment)()

    @property
    def is_remote(self) -> bool:
        return True

    # -- connections -------------------------------------------------------------------------
    def _new_client(self) -> WireClient:
        c = self.config
        return self.client_cls(c.remote_host, c.remote_port, **c.client_options())

    @property
    def reconnects(self) -> int:
        """Reconnects that succeeded, over every env's connection (kept after :meth:`close`)."""
        return sum(loop.reconnects for loop in self._loops)

    def start(self, env: Environment) -> None:
        """Open one connection per env, concurrently, and read each server's metadata.

        Raises:
            PolicyError: a connection could not be opened (every env's episode is an error).
        """
        n = env.num_envs
        c = self.config
        self._episode_requests, self._episode_steps = [0] * n, [0] * n
        self._episode_reconnects = [[] for _ in range(n)]
        self.broker = ChunkBroker(n, self.open_loop_horizon, self.adapter.action_dim, active=self.active_envs)
        self._clients = [self._new_client() for _ in range(n)]
        watch = ServerWatch()  # one server: once a reconnect finds it gone, every env knows
        identity = {} if self.checks_server_identity else {"identity": None}
        self._loops = [
            c.connection_loop(client, on_connect=self._on_connect, on_fault=self._on_fault, watch=watch, **identity)
            for client in self._clients
        ]
        self._pool = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="arena-request")
        errors = [f for f in self._pool.map(self._connect_quietly, self._loops) if f]
        if errors:
            raise PolicyError(f"cannot connect to the policy server: {errors[0]}")
        self._metadata = getattr(self._clients[0], "metadata", None)

    @staticmethod
    def _connect_quietly(loop: ConnectionLoop) -> str | None:
        try:
            loop.connect()
        except TransportError as exc:
            return str(exc)
        return None

    def _on_connect(self, client: WireClient) -> None:
        """After every (re)connect: keep the metadata (the server may have restarted with
        another model). A server that refused connections meanwhile was restarted: every
        connection's next inference may wait ``first_request_timeout_s`` for its warm-up."""
        self._metadata = getattr(client, "metadata", None)
        if client.saw_server_down:
            for other in self._clients:
                other.expect_warmup()

    def _on_fault(self, fault: BaseException) -> None:
        """A connection failed and is re-opened: drop every env's cached chunk."""
        assert self.broker is not None
        self.broker.discard()

    # -- the step loop -----------------------------------------------------------------------
    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """Drop the chunks and latency records of ``env_ids`` (all when ``None``). A protocol
        with episode boundaries calls its clients' ``start_episode`` / ``end_episode`` in its
        subclass (``vla_eval_remote`` does); openpi's wire has none."""
        if self.broker is not None:
            self.broker.reset(env_ids)
        for e in range(len(self._episode_steps)) if env_ids is None else env_ids:
            self._episode_requests[e] = self._episode_steps[e] = 0
            self._episode_reconnects[e] = []

    def set_active(self, env_ids: Sequence[int]) -> None:
        """Only ``env_ids`` run episodes: idle envs send no request and take no chunk rows."""
        super().set_active(env_ids)
        if self.broker is not None:
            self.broker.set_active(self.active_envs or ())

    def get_action(self, env: Environment, observation: dict[str, Any]) -> np.ndarray:
        """Return ``float64 (num_envs, action_dim)`` (the chunks' values, unrounded), fetching
        chunks for active envs that are due.

        Inactive envs (:meth:`is_active`) send nothing and get a zero row (the rollout applies
        their last action instead).

        Raises:
            PolicyError: some envs got no chunk (server gone after the reconnect attempts, or
                a protocol violation); their ``env_ids`` are listed, other envs keep theirs.
        """
        if not self._clients or self.broker is None:
            raise PolicyError("get_action called before start()")
        broker = self.broker
        # A reconnect in one env's request discards every env's chunk, so fetch until none
        # is due (bounded: each round either fills chunks or raises).
        rounds = 0
        while due := np.flatnonzero(broker.due()).tolist():
            if rounds == 2 + self.config.max_reconnect_attempts:
                raise PolicyError("action chunks kept being discarded by reconnects")
            self._fetch_due(due, observation)
            rounds += 1
        # idle envs' rows stay zero: no request; the rollout repeats their last action
        actions = broker.take(broker.active, out=self._simulator_actions(broker.num_envs))
        for e in np.flatnonzero(broker.active).tolist():
            self._episode_steps[e] += 1
        return actions

    def _simulator_actions(self, num_envs: int) -> np.ndarray:
        """Zeros in the dtype actions reach the simulator in, ``float64 (num_envs, action_dim)``
        (the reference clients hand the simulator float64, e.g. openpi's LIBERO and ALOHA
        examples): the one place it is chosen (the broker keeps the chunks' own dtype and casts
        the replayed rows into this array)."""
        return np.zeros((num_envs, self.adapter.action_dim), dtype=np.float64)

    def _fetch_due(self, due: list[int], observation: dict[str, Any]) -> None:
        requests = []
        for i in due:
            try:
                requests.append((i, self.adapter.pack_request(self.adapter.extract(observation, i), self.task_description)))
            except ObservationError as exc:  # e.g. an image to_uint8 refuses: the env's episode is an error
                raise PolicyError(f"env {i}: cannot build the request: {exc}", env_ids=[i]) from exc
        if len(requests) == 1 or not self.config.concurrent_requests:
            results = [self._fetch(*r) for r in requests]
        else:
            assert self._pool is not None
            results = list(self._pool.map(lambda r: self._fetch(*r), requests))
        failed = [(i, err) for i, err in results if err is not None]
        if failed:
            ids = [i for i, _ in failed]
            more = f" (and {len(ids) - 1} more env(s))" if len(ids) > 1 else ""
            raise PolicyError(f"env {ids[0]}: {failed[0][1]}{more}", env_ids=ids, env_errors=dict(failed))

    def _fetch(self, env_id: int, request: dict[str, Any]) -> tuple[int, str | None]:
        """Request a chunk for ``env_id`` and cache it; returns ``(env_id, error or None)``."""
        key = self.server_response_actions_key

        def send(client: WireClient) -> tuple[Any, np.ndarray]:
            response = client.infer(request)
            chunk = self.adapter.unpack_actions(response, key)
            if self.chunk_length is not None:
                self.chunk_length.check(len(chunk), key)
            return response, chunk

        loop = self._loops[env_id]
        before = loop.reconnects
        try:
            (response, chunk), latency_ms = loop.call(send)
        except (ProtocolViolation, ProtocolError, CodecError) as exc:
            # The same request would fail the same way: no retry.
            return env_id, (
                f"protocol violation from {loop.client.endpoint}: {exc} (expected '{key}': a float "
                f"array of shape (H, {self.adapter.action_dim}) with finite values)"
            )
        except TransportError as exc:  # ConnectionGaveUp
            return env_id, str(exc)
        finally:
            if env_id < len(self._episode_reconnects):
                at = (self._episode_requests[env_id], self._episode_steps[env_id])
                self._episode_reconnects[env_id] += [at] * (loop.reconnects - before)
                self._episode_requests[env_id] += 1
        timing = response.get("server_timing") if isinstance(response, dict) else None
        infer_ms = timing.get("infer_ms") if isinstance(timing, dict) else None
        assert self.broker is not None
        self.broker.put(
            [env_id], chunk[None], latency_ms=latency_ms,
            server_infer_ms=float(infer_ms) if isinstance(infer_ms, (int, float)) else None,
        )
        self.on_reply(env_id, response)
        return env_id, None

    def on_reply(self, env_id: int, response: Any) -> None:
        """Called with each reply that served ``env_id`` (after its chunk was cached), from the
        thread that fetched it: a subclass reads the fields its server adds (e.g. that the server
        dropped the env's state). Does nothing by default."""

    def server_metadata(self) -> dict[str, Any] | None:
        """The metadata frame the server sent on connect (the latest, after a reconnect)."""
        return self._metadata

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """``latency`` and ``server_timing`` of the requests that served ``env_id``'s episode
        (:meth:`ChunkBroker.episode_info`) and its ``reconnects``: ``count``, ``at_request`` /
        ``at_step`` (the episode's request and step, from 0, each happened at) and
        ``session_reset`` (a reconnect after the episode's first request: a server that keeps
        per-session state -- vla-eval's chunk buffer, step counter, model state -- started the
        episode's rest afresh), absent without one; ``{}`` before :meth:`start`."""
        if self.broker is None:
            return {}
        info = dict(self.broker.episode_info(env_id))
        at = self._episode_reconnects[env_id] if 0 <= env_id < len(self._episode_reconnects) else []
        if at:  # absent: none
            info["reconnects"] = {
                "count": len(at), "at_request": [r for r, _ in at], "at_step": [t for _, t in at],
                "session_reset": any(r > 0 for r, _ in at),
            }
        return info

    def close(self) -> None:
        for client in self._clients:
            try:
                client.close()
            except Exception:  # closing is best effort and must stay idempotent
                pass
        self._clients = []
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

