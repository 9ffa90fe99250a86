"""``openvla_remote``: OpenVLA's and OpenVLA-OFT's deploy servers (HTTP ``POST /act``).

The adapter (``embodiment``) chooses the server and what is sent: ``libero`` is OpenVLA (one
7-dim action per request, ``unnorm_key`` sent in the body), ``oft_libero`` and ``oft_aloha``
are OpenVLA-OFT (an action chunk per request, 8 x 7 and 25 x 14, replayed open loop through
arena's :class:`~arena.policies.chunks.ChunkBroker`; OFT's ``unnorm_key`` is fixed when its
server starts, so the client sends none). Every reply must have the adapter's chunk length: a
reply of another length is a protocol violation (an ``error`` episode), as is the server's
``"error"`` body (:class:`~arena_vla_eval.openvla.client.RemoteError`), never an action.

Server identity after a reconnect: none is checked. ``deploy.py``'s protocol has no
metadata, handshake or info route (only ``POST /act``), so a server restarted with another
checkpoint cannot be told apart; only the chunk length (fixed per adapter, above) is
checked on every reply. Every other remote client compares its server's identity after a
reconnect (:mod:`arena.policies.connection`, rule 3b).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from arena.policies.remote import ChunkLength, RemoteChunkReplayPolicy, RemotePolicyConfig

from arena_vla_eval.openvla.adapters import OftAlohaAdapter, OftLiberoAdapter, OpenVLAAdapter, OpenVLALiberoAdapter
from arena_vla_eval.openvla.client import OpenVLAHttpClient

__all__ = ["ADAPTERS", "OpenVLARemoteConfig", "OpenVLARemotePolicy"]

#: The built-in adapters, by ``embodiment``.
ADAPTERS: dict[str, type[OpenVLAAdapter]] = {
    "libero": OpenVLALiberoAdapter,
    "oft_libero": OftLiberoAdapter,
    "oft_aloha": OftAlohaAdapter,
}


class OpenVLARemoteConfig(RemotePolicyConfig):
    """Options of ``policy: {type: openvla_remote, ...}``."""

    embodiment: str = Field("libero", description="openvla adapter: libero (OpenVLA), oft_libero or oft_aloha (OpenVLA-OFT)")
    remote_port: int | None = Field(  # type: ignore[assignment]
        None, ge=1, le=65535, description="deploy server port; null = the server's default (OpenVLA 8000, OFT 8777)"
    )
    open_loop_horizon: int | None = Field(  # type: ignore[assignment]
        None, ge=1, description="chunk rows replayed per request; null = the client's (OpenVLA 1, OFT LIBERO 8, ALOHA 25)"
    )
    unnorm_key: str | None = Field(
        None,
        description="the dataset statistics that un-normalize actions (e.g. libero_spatial): OpenVLA gets it in each "
        "request; OFT fixes it when its server starts (managed runs pass --unnorm_key; on oft_libero a suite name such as "
        "libero_spatial becomes its checkpoints' key libero_spatial_no_noops), so no request carries it",
    )
    center_crop: bool = Field(
        True,
        description="libero (OpenVLA): center-crop 0.9 of the image area and resize back to 224, as OpenVLA's "
        "get_vla_action does with --center_crop True (its LIBERO default; its fine-tuned LIBERO checkpoints need it). "
        "OFT crops on its server (deploy.py --center_crop), so its adapters ignore this",
    )
    encoded: bool = Field(False, description="send the double-encoded body {\"encoded\": ...} (both servers accept it)")
    ping_interval_s: float | None = Field(None, description="unused: HTTP has no keepalive pings")
    concurrent_requests: bool = Field(
        False,
        description="send the requests of envs due on one step at once; off by default: deploy.py's handler is a plain "
        "function FastAPI runs in its thread pool, so concurrent requests run the model concurrently on one GPU",
    )
    server_repo_dir: str = Field("openvla", description="managed runs: the openvla (or openvla-oft) checkout")
    checkpoint: str | None = Field(None, description="managed runs: the model (OpenVLA --openvla_path, OFT --pretrained_checkpoint)")
    server_image: str | None = Field(None, description="container image of the deploy server (Slurm with pyxis, OSMO)")
    server_python: str = Field("python", description="managed runs: the interpreter with the deploy server's dependencies")
    server_args: list[str] = Field(
        default_factory=list,
        description="managed runs: more deploy.py options after arena's (OFT: --num_images_in_input and --use_proprio come "
        "from the adapter), e.g. OFT ALOHA's [--use_film, 'True']",
    )

    @model_validator(mode="after")
    def _known_server(self) -> OpenVLARemoteConfig:
        adapter = ADAPTERS.get(self.embodiment)
        if adapter is not None:
            horizon = self.open_loop_horizon or adapter.open_loop_horizon
            if horizon > adapter.chunk_length:
                raise ValueError(
                    f"open_loop_horizon {horizon} exceeds the {adapter.chunk_length} actions each {self.embodiment} reply holds"
                )
        return self

    def port(self) -> int:
        """``remote_port``, else the adapter's server default."""
        if self.remote_port is not None:
            return self.remote_port
        adapter = ADAPTERS.get(self.embodiment)
        return adapter.default_port if adapter is not None else 8000


class OpenVLARemotePolicy(RemoteChunkReplayPolicy):
    """OpenVLA / OpenVLA-OFT behind their deploy servers (see the module doc)."""

    name: ClassVar[str] = "openvla_remote"
    Config: ClassVar[type[OpenVLARemoteConfig]] = OpenVLARemoteConfig
    adapter_family: ClassVar[str] = "openvla"
    server_response_actions_key: ClassVar[str] = "actions"
    client_cls: ClassVar[type[OpenVLAHttpClient]] = OpenVLAHttpClient
    #: deploy.py tells nothing about its server (its client-side metadata would always match)
    checks_server_identity: ClassVar[bool] = False

    def __init__(self, config: OpenVLARemoteConfig, adapter: OpenVLAAdapter | None = None) -> None:
        super().__init__(config, adapter)
        self.config: OpenVLARemoteConfig = config
        length = int(getattr(self.adapter, "chunk_length", 0)) or None
        self.open_loop_horizon = config.open_loop_horizon or int(getattr(self.adapter, "open_loop_horizon", 1))
        self.chunk_length = ChunkLength(length, f"the {config.embodiment} server's chunk") if length else ChunkLength()

    @classmethod
    def make_adapter(cls, config: OpenVLARemoteConfig) -> OpenVLAAdapter:  # type: ignore[override]
        from arena.plugins import get_registry

        adapter_cls = get_registry().adapter(cls.adapter_family, config.embodiment)
        if issubclass(adapter_cls, OpenVLALiberoAdapter):
            return adapter_cls(unnorm_key=config.unnorm_key, center_crop=config.center_crop)
        return adapter_cls()

    def _new_client(self) -> OpenVLAHttpClient:
        c = self.config
        return self.client_cls(c.remote_host, c.port(), encoded=c.encoded, **c.client_options())

    def episode_info(self, env_id: int) -> dict[str, Any]:
        info = super().episode_info(env_id)
        info["serving"] = "chunk" if self.chunk_length.expected and self.chunk_length.expected > 1 else "step"
        if isinstance(self.adapter, OpenVLALiberoAdapter):
            info["center_crop"] = self.adapter.center_crop  # the client-side preprocessing this episode had
        return info


