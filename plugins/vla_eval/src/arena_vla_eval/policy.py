"""``vla_eval_remote``: the client of any vla-eval model server (OpenVLA, OFT, pi0, GR00T,
X-VLA, CogACT, starVLA, the LeRobot bridge's SmolVLA / GR00T N1.7 / MolmoAct2 / VLA-JEPA, ...).

A vla-eval model server is **step-served**: it answers every observation with one action and
keeps the model's action chunk in a per-session buffer (``chunk_size``), so arena's
open-loop horizon is 1 here (the chunk's open-loop replay happens on the server) and each
episode's record says ``"serving": "step"`` in its ``policy_extras``.

One connection per env (one vla-eval session each), opened in :meth:`start`; requests of the
envs due on one step go out concurrently, so a server started with ``max_batch_size`` > 1
batches them. Episode boundaries follow arena's exactly: :meth:`VlaEvalRemotePolicy.reset`
(an episode starts) sends EPISODE_START, which drops the server's chunk buffer, and the end of
an episode (:meth:`VlaEvalRemotePolicy.episode_info`, which the rollout calls once when an
episode ends, whatever its outcome) sends EPISODE_END ``{"steps", "elapsed_sec"}``. A
reconnect mid-episode re-sends EPISODE_START on the new connection (the server's buffer is
gone with the old session), and arena's reconnect rules apply (``max_reconnect_attempts``,
``reconnect_timeout_s``, then ``recheck_timeout_s`` for the run's later episodes; a server that
stays down makes the episode an ``error``). The server's HELLO after a reconnect must equal the
first one (vla-eval's protocol: HELLO is the only thing a server says about itself); another
makes the episode an ``error`` naming the fields that changed. An ERROR
reply (the model raised) makes the env's episode an ``error`` at once, never retried, and
keeps the connection for the next episode.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from arena.errors import ConfigError
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig

from arena_vla_eval.adapters import VlaEvalAdapter
from arena_vla_eval.client import VlaEvalClient

if TYPE_CHECKING:
    from arena.envs.base import Environment

__all__ = ["ENVIRONMENT_ADAPTERS", "VlaEvalRemoteConfig", "VlaEvalRemotePolicy"]

#: arena's environments (registered names) with a vla_eval adapter of the same name.
ENVIRONMENT_ADAPTERS = ("metaworld", "libero", "aloha")


class VlaEvalRemoteConfig(RemotePolicyConfig):
    """Options of ``policy: {type: vla_eval_remote, ...}``.

    The ``server_*`` fields describe the model server a managed run starts
    (:func:`arena_vla_eval.servertask.vla_eval_server_task`); with ``server: {external:
    true}`` they are unused.
    """

    embodiment: str | None = Field(
        None,
        description="vla_eval adapter: metaworld, libero or aloha; null: the run's environment's (arena validate "
        "sets it, and refuses an environment without one, or an adapter of another environment)",
    )
    open_loop_horizon: int = Field(1, ge=1, le=1, description="always 1: a vla-eval server answers one action per observation")
    image_format: Literal["png", "jpeg", "raw"] = Field(
        "png", description="how images travel: png (lossless, vla-eval's default), jpeg (lossy, smaller) or raw"
    )
    benchmark: str | None = Field(None, description="benchmark name sent in HELLO (vla-eval's clients send theirs)")
    observation_params: dict[str, Any] = Field(
        default_factory=dict,
        description="adapter params (e.g. send_state, send_wrist_image); they win over the server's HELLO observation_params",
    )
    server_script: str | None = Field(
        None, description="managed runs: a vla-eval model-server script (e.g. vla-eval's model_servers/pi0.py)"
    )
    server_module: str | None = Field(
        None, description="managed runs: a module holding a model server, run as `python -m MODULE` (e.g. arena_vla_eval.dummy)"
    )
    server_config: str | None = Field(
        None, description="managed runs: a vla-eval model-server YAML (`vla-eval serve --config`; its `script:` names the script)"
    )
    server_args: dict[str, Any] = Field(
        default_factory=dict, description="managed runs: the model server class's arguments (--args.KEY=VALUE)"
    )
    server_launcher: Literal["uv", "python"] = Field(
        "uv", description="uv: `uv run SCRIPT` (vla-eval's way: the script's inline dependencies); python: the run's interpreter"
    )
    server_image: str | None = Field(None, description="container image of the model server (Slurm with pyxis, OSMO)")
    server_gpus: int | None = Field(
        None,
        ge=0,
        description="GPUs the model server needs; null: this machine's (1 when it has a GPU, else 0: set it for a "
        "cluster's nodes)",
    )
    server_startup_timeout_s: float = Field(1800.0, gt=0, description="seconds for the server to load its model and answer GET /health")

    def validate_run(self, run: Any) -> None:
        """At ``arena validate``: the adapter follows the run's environment (``embodiment``
        null: the environment's own; an adapter of another of arena's environments is refused:
        every episode would fail on the first observation); a live run (``execution.mode:
        live``) needs ``server_args.chunk_size: 1``.

        Why: a vla-eval ``PredictModelServer`` with ``chunk_size`` > 1 answers an observation
        from its chunk buffer without calling the model while the buffer holds rows (vla-eval
        0.8.0 ``model_servers/predict.py``, ``_try_serve_from_buffer``): a reply is then a row
        computed from an older observation, and arena, which requests once per
        ``execute_horizon`` steps, would execute it as fresh. vla-eval's own live runner
        (``runners/live_runner.py``) instead streams an observation every control tick over
        one connection; arena's client sends one request at a time, so it refuses rather
        than record ages that are wrong. With ``chunk_size: 1`` every reply is the model's
        action for the observation just sent.

        Raises:
            ValueError: no vla_eval adapter fits the environment, or ``embodiment`` names
                another environment's, or a live run serves chunks from the server's buffer.
        """
        execution = getattr(run, "execution", None)
        if getattr(execution, "live", False) and self.server_args.get("chunk_size") != 1:
            raise ValueError(
                "vla_eval_remote cannot run live with a server that answers from its chunk buffer "
                f"(server_args.chunk_size is {self.server_args.get('chunk_size', 'unset')}): such a server replies "
                "to an observation with a row computed from an older one, so the actions' ages would be wrong. "
                "Start the server with server_args: {chunk_size: 1} (every reply computed from the observation "
                "sent; for an external server, start it so and say so here), or evaluate it with execution.mode: sync"
            )
        env_name = getattr(run.environment_cls, "name", None) or run.environment_type
        fits = env_name if env_name in ENVIRONMENT_ADAPTERS else None
        if self.embodiment is None:
            if fits is None:
                raise ValueError(
                    f"vla_eval_remote has no adapter for the environment {env_name!r}: set policy.embodiment "
                    f"({', '.join(ENVIRONMENT_ADAPTERS)}) if its observations have that layout"
                )
            self.embodiment = fits
        elif self.embodiment in ENVIRONMENT_ADAPTERS and env_name in ENVIRONMENT_ADAPTERS and self.embodiment != fits:
            raise ValueError(
                f"policy.embodiment {self.embodiment!r} is the adapter of arena's {self.embodiment!r} environment, not "
                f"of {env_name!r}: every episode would fail on the first observation (leave embodiment unset: it "
                "follows the environment)"
            )

    def model_identity(self) -> dict[str, str | None] | None:
        """What a managed server loads: ``server_config`` (absolute), the ``script`` it runs and
        the ``checkpoint`` (``args.checkpoint`` / ``model_path`` after ``server_args``);
        ``None`` without a config or script (``server_module``, an external server)."""
        if self.server_config:
            from arena_vla_eval.serverconfig import load_server_config

            served = load_server_config(self.server_config)
            return {"server_config": str(served.path), "script": str(served.script),
                    "checkpoint": served.checkpoint(self.server_args)}
        if self.server_script:
            checkpoint = self.server_args.get("model_path") or self.server_args.get("checkpoint")
            return {"server_config": None, "script": self.server_script,
                    "checkpoint": None if checkpoint is None else str(checkpoint)}
        return None

    @field_validator("server_args")
    @classmethod
    def _scalar_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not str(key).replace("_", "").replace(".", "").isalnum():
                raise ValueError(f"server_args key {key!r} is not an argument name")
        return value


class VlaEvalRemotePolicy(RemoteChunkReplayPolicy):
    """A vla-eval model server behind vla-eval's websocket protocol (see the module doc)."""

    name: ClassVar[str] = "vla_eval_remote"
    Config: ClassVar[type[VlaEvalRemoteConfig]] = VlaEvalRemoteConfig
    adapter_family: ClassVar[str] = "vla_eval"
    server_response_actions_key: ClassVar[str] = "actions"
    client_cls: ClassVar[type[VlaEvalClient]] = VlaEvalClient

    def __init__(self, config: VlaEvalRemoteConfig, adapter: VlaEvalAdapter | None = None) -> None:
        super().__init__(config, adapter)
        self.config: VlaEvalRemoteConfig = config
        self.ignored_params: list[str] = []
        self._episode_started: list[float] = []
        self._env: Environment | None = None
        self._identity: dict[str, str | None] | None = None
        #: ``"live"`` when arena's live mode drives this policy (:class:`arena.live.policy.LivePolicy`
        #: sets it): EPISODE_START then says ``mode: "live"``, as vla-eval's live runner does.
        self.execution_mode = "sync"

    @classmethod
    def make_adapter(cls, config: VlaEvalRemoteConfig) -> VlaEvalAdapter:  # type: ignore[override]
        """The ``vla_eval`` adapter ``config.embodiment`` names.

        Raises:
            ConfigError: ``embodiment`` is unset (``arena validate`` and ``arena run`` set it
                from the environment; a policy built by hand must name it).
        """
        if config.embodiment is None:
            raise ConfigError(
                "vla_eval_remote: policy.embodiment is unset; arena sets it from the run's environment when it reads "
                f"the experiment, a policy built outside a run must name it ({', '.join(ENVIRONMENT_ADAPTERS)})",
                key="policy.embodiment",
            )
        return super().make_adapter(config)  # type: ignore[return-value]

    def _new_client(self) -> VlaEvalClient:
        c = self.config
        return self.client_cls(
            c.remote_host, c.remote_port, image_format=c.image_format, benchmark=c.benchmark, **c.client_options()
        )

    def start(self, env: Environment) -> None:
        """Connect every env (HELLO each) and configure the adapter from the server's
        ``observation_params`` and the run's.

        Raises:
            PolicyError: a connection could not be opened.
        """
        super().start(env)
        self._env = env
        try:
            self._identity = self.config.model_identity()
        except ConfigError:  # the YAML is not on this node: the record keeps the path as written
            self._identity = {"server_config": self.config.server_config, "script": None, "checkpoint": None}
        self._episode_started = [time.perf_counter()] * env.num_envs
        meta = self._metadata or {}
        spec = meta.get("action_spec")
        if isinstance(spec, dict) and spec:  # vla-eval's orchestrator compares specs and warns, so do we
            dims = sum(int(part.get("dims", 0)) for part in spec.values() if isinstance(part, dict))
            if dims and dims != self.adapter.action_dim:
                warnings.warn(
                    f"vla_eval_remote: the server's action_spec ({', '.join(spec)}) has {dims} dims; the "
                    f"{self.config.embodiment} adapter expects {self.adapter.action_dim} (replies of another size are "
                    "protocol violations)",
                    stacklevel=2,
                )
        configure = getattr(self.adapter, "configure", None)
        if callable(configure):
            self.ignored_params = configure(meta.get("observation_params"), self.config.observation_params)
            if self.ignored_params:
                warnings.warn(
                    f"vla_eval_remote: the {self.config.embodiment} adapter has no observation params "
                    f"{self.ignored_params} (asked by the server or the run); they are not applied",
                    stacklevel=2,
                )

    def reset(self, env_ids: list[int] | None = None, seeds: list[int] | None = None) -> None:
        """New episodes for ``env_ids``: EPISODE_END for an episode still open on the env's
        session, then EPISODE_START ``{"task": ...}``, the task as the adapter says
        (:meth:`~arena_vla_eval.adapters.VlaEvalAdapter.episode_task`: LIBERO's as vla-eval's
        LIBERO client sends it)."""
        super().reset(env_ids, seeds)
        if not self._clients:
            return
        ids = list(range(len(self._clients))) if env_ids is None else list(env_ids)
        for j, env_id in enumerate(ids):
            client = self._clients[env_id]
            if client.in_episode:
                client.end_episode(env_id, self._result(env_id))
            seed = int(seeds[j]) if seeds is not None and j < len(seeds) else None
            env = self._env
            task = self.adapter.episode_task(
                self.task_description or "",
                getattr(env, "config", None),
                seed,
                lambda env_id=env_id: dict(env.episode_info(env_id) or {}) if env is not None else {},
            )
            self._episode_started[env_id] = time.perf_counter()
            start: dict[str, Any] = {"task": task}
            if self.execution_mode == "live":  # vla-eval's sync runner sends no mode; its live runner "live"
                start["mode"] = "live"
            client.start_episode(env_id, start)

    def _result(self, env_id: int) -> dict[str, Any]:
        steps = int(self.broker.requests[env_id]) if self.broker is not None else 0
        return {"steps": steps, "elapsed_sec": round(time.perf_counter() - self._episode_started[env_id], 3)}

    def episode_info(self, env_id: int) -> dict[str, Any]:
        """The episode's request latencies, ``serving: "step"``, the server's class and, for a
        server started from a config or script, the model's identity
        (:meth:`VlaEvalRemoteConfig.model_identity`, under ``vla_eval.model``); ends
        the env's server-side episode (EPISODE_END), as the rollout calls this once when an
        episode ends."""
        info = super().episode_info(env_id)
        if 0 <= env_id < len(self._clients) and self._clients[env_id].in_episode:
            self._clients[env_id].end_episode(env_id, self._result(env_id))
        meta = self._metadata or {}
        info["serving"] = "step"
        info["vla_eval"] = {"model_server": meta.get("model_server"), "image_format": self.config.image_format}
        if self._identity:
            info["vla_eval"]["model"] = dict(self._identity)
        return info

    def close(self) -> None:
        """End open episodes (best effort) and disconnect; the server keeps running."""
        for env_id, client in enumerate(self._clients):
            if client.in_episode:
                try:
                    client.end_episode(env_id, self._result(env_id))
                except Exception:  # closing is best effort
                    pass
        super().close()
