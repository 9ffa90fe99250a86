"""``lerobot_remote``: the client of ``arena serve lerobot`` (a LeRobot checkpoint).

Per env it sends the observation in LeRobot's feature names (the ``lerobot/<embodiment>``
adapter) plus what the server needs to keep LeRobot's per-episode state for that env:
``session`` (a random id of this client, one per run's policy), ``env_id`` and ``new_episode``
(true on the first request after the env's episode reset). The reply holds
``metadata()["actions_per_request"]`` rows: ``n_action_steps`` for a chunk-served policy (ACT),
replayed open-loop before the next request, 1 for a step-served one (Diffusion and the others),
which thus sees every observation, as ``lerobot-eval``'s ``select_action`` loop does
(:mod:`arena_lerobot.model`).
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import AliasChoices, Field, model_validator

from arena.errors import PolicyError
from arena.policies.chunks import ChunkBroker
from arena.policies.remote import ChunkLength, RemoteChunkReplayPolicy, RemotePolicyConfig

#: The reply field of ``arena serve lerobot`` (:data:`arena_lerobot.model.STATE_RESTARTED_KEY`;
#: not imported from there: that module is the model venv's side).
STATE_RESTARTED_KEY = "state_restarted"

if TYPE_CHECKING:
    from arena.envs.base import Environment

#: The adapter used when ``embodiment`` is unset, by environment type (``Environment.name``).
DEFAULT_ADAPTERS: dict[str, str] = {
    "aloha": "aloha", "pusht": "pusht", "libero": "libero", "metaworld": "metaworld", "lerobot_env": "lerobot_env",
}


class LeRobotRemoteConfig(RemotePolicyConfig):
    """Options of ``policy: {type: lerobot_remote, ...}``."""

    policy_path: str = Field(
        description="the checkpoint the server loads: a LeRobot pretrained_model directory (as the server's machine "
        "sees it) or a Hub id"
    )
    embodiment: str | None = Field(  # type: ignore[assignment]
        None,
        description="lerobot embodiment adapter (aloha, pusht, libero, metaworld); null: the one for the environment's type",
        validation_alias=AliasChoices("embodiment", "lerobot_embodiment_adapter"),
    )
    n_action_steps: int | None = Field(
        None, ge=1, description="actions executed per inference (the open-loop horizon of a chunking policy); null: the checkpoint's"
    )
    open_loop_horizon: int | None = Field(  # type: ignore[assignment]
        None, ge=1, description="rows of each reply replayed before the next request; null: all of them"
    )
    device: str = Field("auto", description="the server's torch device: auto (CUDA when present), cpu, cuda, cuda:1")
    seed: int | None = Field(
        None, description="seed of the server's per-env Diffusion noise (reproducible actions); null: torch's global generator"
    )
    gpu: int = Field(0, ge=0, description="GPUs the server task asks for (0: the CPU, or whatever device auto finds)")
    rename_map: dict[str, str] = Field(
        default_factory=dict,
        description="lerobot-eval's --rename_map: observation feature renames applied by the checkpoint's preprocessor",
    )
    allow_missing_stats: bool = Field(
        False, description="serve a checkpoint whose normalizer lacks statistics for some features (a warning, not a refusal)"
    )
    max_states: int | None = Field(
        None, ge=1, description="per-env policy states the server keeps (its default: 512); fewer than the envs served restarts states mid-episode"
    )
    max_batch_size: int | None = Field(
        None, ge=1, description="the server's --max-batch-size (1: one request per forward pass); null: the server's default"
    )
    torch_threads: int | None = Field(
        None, ge=1, description="the server's torch threads (-o torch_threads=, and OMP_NUM_THREADS); null: torch's default "
        "(reference_exact: 1)"
    )
    reference_exact: bool = Field(
        False,
        description="serve as lerobot-eval --eval.batch_size=1 computes, bit for bit: one request per forward pass "
        "(max_batch_size 1) and the server's torch threads pinned (torch_threads, default 1: run lerobot-eval with "
        "OMP_NUM_THREADS=1 to compare); false: batched serving, equal to the last float32 bits or so (README, "
        "'Reference-exact serving')",
    )
    first_request_timeout_s: float = Field(300.0, gt=0, description="seconds for the first inference (weights load first)")

    @model_validator(mode="after")
    def _exact_means_batch_one(self) -> "LeRobotRemoteConfig":
        if self.reference_exact and self.max_batch_size not in (None, 1):
            raise ValueError(
                f"reference_exact serves one request per forward pass (lerobot-eval's batch size 1); "
                f"max_batch_size {self.max_batch_size} contradicts it: drop one of the two"
            )
        return self

    def server_batch_size(self) -> int | None:
        """The server's ``--max-batch-size``: 1 when :attr:`reference_exact`, else :attr:`max_batch_size`."""
        return 1 if self.reference_exact else self.max_batch_size

    def server_torch_threads(self) -> int | None:
        """The server's torch thread count: :attr:`torch_threads`, else 1 when
        :attr:`reference_exact`, else ``None`` (torch's default)."""
        if self.torch_threads is not None:
            return self.torch_threads
        return 1 if self.reference_exact else None


class LeRobotRemotePolicy(RemoteChunkReplayPolicy):
    """A LeRobot policy behind ``arena serve lerobot`` (module docstring).

    Raises (from :meth:`start`):
        PolicyError: no adapter is registered for the environment, or ``open_loop_horizon``
            exceeds the rows the server returns.
    """

    name: ClassVar[str] = "lerobot_remote"
    Config: ClassVar[type[LeRobotRemoteConfig]] = LeRobotRemoteConfig
    adapter_family: ClassVar[str] = "lerobot"
    server_response_actions_key: ClassVar[str] = "actions"

    def __init__(self, config: LeRobotRemoteConfig, adapter: Any = None) -> None:
        if adapter is None:  # known now when the config names it; else from the environment in start()
            adapter = self.make_adapter(config) if config.embodiment else _Pending()
        super().__init__(config, adapter)
        self.config: LeRobotRemoteConfig = config
        self.open_loop_horizon = config.open_loop_horizon or 1  # until start() reads the server's rows per reply
        self.session = uuid.uuid4().hex
        self._new_episode: set[int] = set()
        #: Per env: requests of its current episode whose reply said the server had dropped
        #: (``max_states``) and restarted the env's policy state mid-episode.
        self._restarts: dict[int, int] = {}
        self._restarted_episodes = 0
        self._lock = threading.Lock()

    def start(self, env: Environment) -> None:
        if isinstance(self.adapter, _Pending):
            embodiment = self.config.embodiment or DEFAULT_ADAPTERS.get(getattr(env, "name", ""))
            if embodiment is None:
                raise PolicyError(
                    f"lerobot_remote has no default adapter for the {getattr(env, 'name', '?')} environment "
                    f"(known: {', '.join(DEFAULT_ADAPTERS)}); set policy.embodiment"
                )
            from arena.plugins import get_registry

            try:
                self.adapter = get_registry().adapter(self.adapter_family, embodiment)()
            except Exception as exc:  # noqa: BLE001 - an unknown adapter names the registered ones
                raise PolicyError(f"lerobot_remote: {exc}") from None
        bind = getattr(self.adapter, "bind", None)
        if callable(bind):  # an adapter whose action width is the environment's (lerobot_env)
            bind(env)
        super().start(env)
        meta = self._metadata or {}
        rows = int(meta.get("actions_per_request") or 1)
        horizon = self.config.open_loop_horizon or rows
        if horizon > rows:
            raise PolicyError(
                f"open_loop_horizon {horizon} exceeds the {rows} action(s) the server returns per request "
                f"({meta.get('policy_type', '?')} served by {meta.get('serving', '?')})"
            )
        threads, served = self.config.server_torch_threads(), meta.get("torch_threads")
        if threads is not None and served is not None and int(served) != threads:  # e.g. an external server
            raise PolicyError(
                f"the server computes with {served} torch thread(s), the run asks for {threads} "
                f"({'reference_exact' if self.config.reference_exact else 'torch_threads'}): serve it with -o torch_threads={threads}"
            )
        self.open_loop_horizon = horizon
        self.chunk_length = ChunkLength(rows, "the server's actions_per_request")
        self.broker = ChunkBroker(env.num_envs, horizon, self.adapter.action_dim, active=self.active_envs)
        self._new_episode = set(range(env.num_envs))

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """Drop the envs' chunks; their next request tells the server to start a new episode."""
        super().reset(env_ids, seeds)
        ids = range(self.broker.num_envs) if env_ids is None and self.broker is not None else (env_ids or [])
        self._new_episode.update(int(i) for i in ids)
        with self._lock:
            for i in ids:
                self._restarts.pop(int(i), None)

    def on_reply(self, env_id: int, response: Any) -> None:
        """Count the replies that say the server restarted this env's state mid-episode
        (``state_restarted``: it had dropped it for ``max_states``)."""
        if isinstance(response, dict) and response.get(STATE_RESTARTED_KEY):
            with self._lock:
                if not self._restarts.get(env_id):
                    self._restarted_episodes += 1
                self._restarts[env_id] = self._restarts.get(env_id, 0) + 1

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """Latency and server timing, plus ``lerobot_state_restarts``: how many times the server
        restarted this episode's policy state (action queue, observation history, temporal
        ensembler) in its middle because it had dropped it (``max_states``), when it did."""
        info = super().episode_info(env_id)
        with self._lock:
            restarts = self._restarts.get(env_id, 0)
        if restarts:
            info["lerobot_state_restarts"] = restarts
        return info

    def run_warnings(self) -> list[str]:
        """The server's own warnings (its metadata) and, when it happened, how many episodes had
        their policy state restarted mid-episode by the server's ``max_states`` bound."""
        meta = self._metadata or {}
        warnings = [str(w) for w in meta.get("warnings") or []]
        if self._restarted_episodes:
            warnings.append(
                f"arena serve lerobot dropped the policy state of {self._restarted_episodes} running episode(s) "
                f"(max_states {meta.get('max_states', '?')} per-env states, fewer than the envs it served): their "
                "action queue / observation history restarted mid-episode (records: policy_extras."
                "lerobot_state_restarts); serve with a larger -o max_states"
            )
        return warnings

    def _fetch(self, env_id: int, request: dict[str, Any]) -> tuple[int, str | None]:
        request = {**request, "session": self.session, "env_id": int(env_id), "new_episode": env_id in self._new_episode}
        result = super()._fetch(env_id, request)
        if result[1] is None:
            self._new_episode.discard(env_id)
        return result


class _Pending:
    """Stands for the adapter until :meth:`LeRobotRemotePolicy.start` knows the environment."""

    action_dim = 0
