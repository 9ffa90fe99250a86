"""The DreamZero server as a ServerTask (``socket_test_optimized_AR.py`` under torchrun).

Rank 0 serves the RoboArena websocket protocol; the other ranks follow its broadcasts. The
server sends its greeting on connect, so readiness is ``websocket`` (it has no health route:
plain HTTP gets 426). It needs an H100-class GPU (it runs out of memory on 48 GB) and is
**not shareable**: it keeps a single observation history.
"""

from __future__ import annotations

from arena.servertask import ServerResources, ServerTask

from arena_dreamzero.policy import DreamZeroRemoteConfig

__all__ = ["dreamzero_server_task"]

_LAUNCH = (
    "cd {repo_dir} && exec python -m torch.distributed.run --standalone --nproc_per_node={gpus} "
    "socket_test_optimized_AR.py --port {port} --enable-dit-cache --model-path {model_path}"
)


def dreamzero_server_task(config: DreamZeroRemoteConfig) -> ServerTask:
    """The server of ``config``: its checkpoint, ``server_gpus`` H100s, never shared."""
    argv = ["bash", "-c", _LAUNCH]
    return ServerTask(
        name="dreamzero-droid",
        image=config.server_image,
        image_hint=(
            "no public DreamZero server image exists: build one with the DreamZero checkout at server_repo_dir and "
            "the checkpoint at model_path, push it to a registry the cluster can pull from, and set policy.server_image"
        ),
        command=argv,
        local_command=argv,
        port=5000,
        readiness="websocket",
        startup_timeout_s=3600.0,
        resources=ServerResources(
            cpu=8, gpu=config.server_gpus, gpu_memory_gb=80.0, memory=128.0, gpu_type="H100", storage=100.0
        ),
        env={"NCCL_DEBUG": "INFO", "NO_ALBUMENTATIONS_UPDATE": "1"},
        shareable=False,
        checkpoint="{model_path}",
        fields={"repo_dir": config.server_repo_dir, "model_path": config.model_path, "gpus": str(config.server_gpus)},
    )
