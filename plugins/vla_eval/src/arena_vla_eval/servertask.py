"""The vla-eval model server as a ServerTask (for ``arena run`` to start and stop it).

vla-eval starts a model server in one of two ways, both supported:

* ``vla-eval serve --config CONFIG.yaml --address HOST:PORT``: the YAML names the ``script``
  and its ``args``; vla-eval runs ``uv run SCRIPT ...`` (``cli/main.py`` ``cmd_serve``). arena
  reads the YAML and builds that command itself with the script resolved from the YAML's
  location (:mod:`arena_vla_eval.serverconfig`), so a shipped config runs from anywhere;
* the script itself, ``uv run SCRIPT --address HOST:PORT --args.KEY=VALUE ...`` (or with the
  run's interpreter, ``server_launcher: python``), or a module, ``python -m MODULE ...``
  (``server_module``; arena's CI uses :mod:`arena_vla_eval.dummy`, a real vla-eval model
  server with a dummy model).

Every script ends in ``vla_eval.model_servers.serve.run_server``, which binds ``--address``
and serves websocket and HTTP on one port. Readiness is ``GET /health`` (200 ``{"status":
"ok"}``, answered once the model's ``__init__`` returned: weights are loaded). The server takes
``{host}``, so backends bind it to loopback where the simulation shares the node. It cannot
require an API key (vla-eval has no authentication): exposed, it is reported as
unauthenticated. Shareable: each connection is its own session, and sessions are batched.
"""

from __future__ import annotations

import json
from typing import Any

from arena.errors import ConfigError
from arena.launch.gpus import discover_gpus
from arena.servertask import ServerResources, ServerTask

from arena_vla_eval.policy import VlaEvalRemoteConfig
from arena_vla_eval.serverconfig import load_server_config, stringify

__all__ = ["VLA_EVAL_IMAGE_HINT", "vla_eval_server_task"]

VLA_EVAL_IMAGE_HINT = (
    "vla-eval publishes benchmark images but no model-server image: build one with uv and the model server script "
    "(or `pip install vla-eval` and its model's dependencies), push it to a registry the cluster can pull from, and "
    "set policy.server_image"
)


def _arg(value: Any) -> str:
    """One argv token as vla-eval's ``_stringify_arg`` writes it (lists and maps as JSON)."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _escape(text: str) -> str:
    """``text`` safe inside a ServerTask template (``{`` and ``}`` doubled)."""
    return text.replace("{", "{{").replace("}", "}}")


def vla_eval_server_task(config: VlaEvalRemoteConfig) -> ServerTask:
    """The ServerTask that serves ``config``'s model server.

    Raises:
        ConfigError: none, or more than one, of ``server_script``, ``server_module`` and
            ``server_config`` is set (a run with ``server: {external: true}`` needs none).
    """
    given = [name for name in ("server_script", "server_module", "server_config") if getattr(config, name)]
    if len(given) != 1:
        raise ConfigError(
            "vla_eval_remote needs exactly one of policy.server_script (a vla-eval model-server script), "
            "policy.server_module (`python -m MODULE`) or policy.server_config (a `vla-eval serve` YAML) to start "
            f"its server (got {given or 'none'}); or run the server yourself and set `server: {{external: true}}`",
            key="policy",
        )
    args = [f"--args.{key}={_escape(_arg(value))}" for key, value in config.server_args.items()]
    address = ["--address", "{host}:{port}"]
    checkpoint = config.server_args.get("model_path") or config.server_args.get("checkpoint")
    if config.server_config:  # what `vla-eval serve --config` runs, from any directory (serverconfig)
        served = load_server_config(config.server_config)
        merged = {**served.args, **config.server_args}
        local = image_cmd = [
            "uv", "run", _escape(str(served.script)),
            *(f"--args.{key}={_escape(stringify(value))}" for key, value in merged.items()), *address,
        ]
        checkpoint = served.checkpoint(config.server_args)
        name = f"vla-eval-{served.path.stem}"
    elif config.server_module:
        local = ["{python}", "-m", config.server_module, *address, *args]
        image_cmd = ["python", "-m", config.server_module, *address, *args]
        name = f"vla-eval-{config.server_module.rsplit('.', 1)[-1]}"
    else:
        script = _escape(str(config.server_script))
        if config.server_launcher == "uv":
            local = image_cmd = ["uv", "run", script, *address, *args]
        else:
            local = ["{python}", script, *address, *args]
            image_cmd = ["python", script, *address, *args]
        stem = str(config.server_script).rsplit("/", 1)[-1].removesuffix(".py")
        name = f"vla-eval-{stem}"
    gpus = config.server_gpus
    if gpus is None:  # this machine's: like a server that takes whatever device it finds
        gpus = 1 if discover_gpus()[0] else 0
    return ServerTask(
        name="".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name),
        image=config.server_image,
        image_hint=VLA_EVAL_IMAGE_HINT,
        command=image_cmd,
        local_command=local,
        port=8000,
        readiness="http:/health",
        startup_timeout_s=config.server_startup_timeout_s,
        resources=ServerResources(cpu=4, gpu=gpus, memory=32.0 if gpus else 2.0),
        env={"PYTHONUNBUFFERED": "1"},
        shareable=True,
        checkpoint=_escape(str(checkpoint)) if checkpoint else None,
    )
