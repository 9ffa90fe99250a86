"""The GR00T policy server as a ServerTask (``gr00t/eval/run_gr00t_server.py`` of Isaac-GR00T).

``run_gr00t_server.py`` binds 127.0.0.1 unless told otherwise, so the container command binds
``--host 0.0.0.0`` (reachable from the simulation's node); the local command binds the
backend's ``{host}``. Readiness is a ZeroMQ ``ping``. GR00T's ``Gr00tPolicy`` keeps no
per-client state, so one server may serve several runs (``shareable``).
"""

from __future__ import annotations

from arena.servertask import ServerResources, ServerTask

from arena_gr00t.policy import Gr00tRemoteConfig

__all__ = ["gr00t_server_task"]


def _argv(bind: str) -> list[str]:
    return [
        "uv", "run", "--directory", "{repo_dir}", "python", "gr00t/eval/run_gr00t_server.py",
        "--model_path", "{model_path}", "--embodiment_tag", "{embodiment_tag}",
        "--host", bind, "--port", "{port}",
    ]  # fmt: skip


def gr00t_server_task(config: Gr00tRemoteConfig) -> ServerTask:
    """The server of ``config``: its model path and embodiment tag, port 5555, one GPU."""
    tag = config.embodiment_tag.lower().replace("_", "-")
    return ServerTask(
        name=f"gr00t-{tag}",
        image=config.server_image,
        command=_argv("0.0.0.0"),
        local_command=_argv("{host}"),
        port=5555,
        readiness="zmq-ping",
        startup_timeout_s=600.0,
        resources=ServerResources(cpu=4, gpu=1, gpu_memory_gb=24.0, memory=32.0),
        shareable=True,
        checkpoint="{model_path}",
        fields={
            "repo_dir": config.server_repo_dir,
            "model_path": config.model_path,
            "embodiment_tag": config.embodiment_tag,
        },
    )
