"""The GR00T policy server as a ServerTask (``gr00t/eval/run_gr00t_server.py`` of Isaac-GR00T).

``run_gr00t_server.py`` binds 127.0.0.1 unless told otherwise, so both commands pass
``--host {host}``: the launch backend decides the address (loopback when the simulation runs
on the same node, all interfaces where it cannot). A client in the ``n1.6-sim`` wire mode gets
a server started with ``--use-sim-policy-wrapper``. Readiness is a ZeroMQ ``ping``. GR00T's
``Gr00tPolicy`` keeps no per-client state, so one server may serve several runs
(``shareable``). ``run_gr00t_server.py`` has no ``api_token`` option: the server is
unauthenticated, and an exposed one is reachable by anyone who can reach the node.
"""

from __future__ import annotations

from arena.servertask import ServerResources, ServerTask

from arena_gr00t.policy import Gr00tRemoteConfig

__all__ = ["gr00t_server_task"]

#: No public GR00T server image exists (NVIDIA's is on an internal staging registry).
GR00T_IMAGE_HINT = (
    "no public GR00T server image exists: build one from Isaac-GR00T's Dockerfile (the checkout at "
    "server_repo_dir, /workspace by default), push it to a registry the cluster can pull from, and set "
    "policy.server_image (or server.image)"
)


def _argv(sim_wrapper: bool) -> list[str]:
    return [
        "uv", "run", "--directory", "{repo_dir}", "python", "gr00t/eval/run_gr00t_server.py",
        "--model_path", "{model_path}", "--embodiment_tag", "{embodiment_tag}",
        "--host", "{host}", "--port", "{port}",
    ] + (["--use-sim-policy-wrapper"] if sim_wrapper else [])  # fmt: skip


def gr00t_server_task(config: Gr00tRemoteConfig) -> ServerTask:
    """The server of ``config``: its model path and embodiment tag, port 5555, one GPU."""
    tag = config.embodiment_tag.lower().replace("_", "-")
    argv = _argv(config.wire_generation == "n1.6-sim")
    return ServerTask(
        name=f"gr00t-{tag}",
        image=config.server_image,
        image_hint=GR00T_IMAGE_HINT,
        command=argv,
        local_command=argv,
        port=5555,
        readiness="zmq-ping",
        startup_timeout_s=600.0,
        resources=ServerResources(cpu=4, gpu=1, gpu_memory_gb=24.0, memory=32.0, storage=40.0),  # model download
        shareable=True,
        checkpoint="{model_path}",
        fields={
            "repo_dir": config.server_repo_dir,
            "model_path": config.model_path,
            "embodiment_tag": config.embodiment_tag,
        },
    )
