"""The OpenVLA / OpenVLA-OFT deploy server as a ServerTask.

Both are ``vla-scripts/deploy.py`` of their checkout (draccus options ``--host``, ``--port``;
OpenVLA ``--openvla_path``; OFT ``--pretrained_checkpoint``, ``--unnorm_key`` and, from the
adapter, ``--num_images_in_input`` and ``--use_proprio``), FastAPI on
uvicorn, one GPU. Neither has a health route; FastAPI serves its schema at
``/openapi.json`` once the app runs, which happens after the model loaded, so readiness is
``GET /openapi.json``. Neither can require an API key. Shareable: stateless per request.
"""

from __future__ import annotations

from arena.errors import ConfigError
from arena.servertask import ServerResources, ServerTask

from arena_vla_eval.openvla.policy import ADAPTERS, OpenVLARemoteConfig

__all__ = ["oft_unnorm_key", "openvla_server_task"]

#: LIBERO suites whose OFT datasets (and so checkpoints' ``norm_stats`` keys) carry
#: ``_no_noops`` (OFT ``LIBERO.md`` l.94, ``README.md`` l.42, ``prismatic/vla/datasets/rlds/oxe/
#: configs.py`` l.645-673).
_LIBERO_SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10")

_HINT = (
    "neither OpenVLA nor OpenVLA-OFT publishes a server image: build one from the checkout (its requirements, torch, "
    "and for OFT its transformers fork), push it to a registry the cluster can pull from, and set policy.server_image"
)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def oft_unnorm_key(embodiment: str, unnorm_key: str) -> str:
    """The ``--unnorm_key`` an OFT server of ``embodiment`` starts with: on LIBERO a suite name
    (``libero_spatial``) becomes its ``_no_noops`` key, as OFT's own client does when the plain
    key is missing (``run_libero_eval.py`` ``check_unnorm_key`` l.179-192; OFT's LIBERO
    checkpoints hold only the ``_no_noops`` keys); anything else is passed as given."""
    if embodiment == "oft_libero" and unnorm_key in _LIBERO_SUITES:
        return f"{unnorm_key}_no_noops"
    return unnorm_key


def openvla_server_task(config: OpenVLARemoteConfig) -> ServerTask:
    """The deploy server of ``config`` (its checkpoint; OFT with its ``unnorm_key`` and the
    adapter's image count and proprio input, so that the server takes what the client sends).

    Raises:
        ConfigError: no ``checkpoint``, or an OFT run without ``unnorm_key`` (the server needs
            one at start).
    """
    adapter = ADAPTERS.get(config.embodiment)
    oft = adapter is not None and adapter.server == "oft"
    if not config.checkpoint:
        raise ConfigError(
            "openvla_remote needs policy.checkpoint for arena to start its deploy server; or run it yourself and set "
            "`server: {external: true}`",
            key="policy.checkpoint",
        )
    if oft and not config.unnorm_key:
        raise ConfigError("an OpenVLA-OFT server needs policy.unnorm_key at start (deploy.py --unnorm_key)", key="policy.unnorm_key")
    options = ["--host", "{host}", "--port", "{port}"]
    if oft and adapter is not None:
        options += [
            "--pretrained_checkpoint", "{checkpoint}",
            "--unnorm_key", _escape(oft_unnorm_key(config.embodiment, str(config.unnorm_key))),
            "--num_images_in_input", str(adapter.num_images_in_input),
            "--use_proprio", str(adapter.use_proprio),
        ]  # fmt: skip
    else:
        options += ["--openvla_path", "{checkpoint}"]
    options += [_escape(a) for a in config.server_args]
    script = ["{server_python}", "vla-scripts/deploy.py", *options]
    return ServerTask(
        name="openvla-oft-deploy" if oft else "openvla-deploy",
        image=config.server_image,
        image_hint=_HINT,
        command=["bash", "-c", "cd {repo_dir} && exec " + " ".join(script)],
        local_command=["bash", "-c", "cd {repo_dir} && exec " + " ".join(script)],
        port=8777 if oft else 8000,
        readiness="http:/openapi.json",
        startup_timeout_s=1800.0,
        resources=ServerResources(cpu=4, gpu=1, gpu_memory_gb=24.0, memory=32.0, storage=50.0),
        shareable=True,
        checkpoint="{checkpoint}",
        fields={"repo_dir": config.server_repo_dir, "checkpoint": config.checkpoint, "server_python": config.server_python},
    )
