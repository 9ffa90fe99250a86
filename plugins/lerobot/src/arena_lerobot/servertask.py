"""The server task of ``lerobot_remote``: ``arena serve lerobot`` in the ``lerobot`` venv.

Locally (and on Slurm without containers) ``{python}`` is the interpreter of the venv the model
declares (:data:`arena_lerobot.venv.LEROBOT_VENV`, ``ServerTask.venv``), so arena's own
interpreter needs no torch. In a container (Slurm with pyxis, OSMO) ``command`` runs ``arena
serve lerobot`` in ``server.image``: LeRobot publishes no such image, so a run names its own
(any image with ``pip install 'arena-plugin-lerobot[model]'``).
"""

from __future__ import annotations

import json

from arena.servertask import ServerResources, ServerTask, arena_server_task

from arena_lerobot.policy import LeRobotRemoteConfig
from arena_lerobot.venv import LEROBOT_VENV

IMAGE_HINT = (
    "LeRobot publishes no arena server image: build one with `pip install 'arena-plugin-lerobot[model]'` "
    "(torch 2.11.0, lerobot 0.6.1) and set server.image"
)


def lerobot_server_task(config: LeRobotRemoteConfig) -> ServerTask:
    """``arena serve lerobot -o policy_path=... [-o n_action_steps=N] [-o seed=S] -o device=...`` for ``config``.

    Loading takes seconds for ACT and Diffusion on a CPU (torch's import dominates), so the
    start-up allowance is 10 minutes (a Hub id downloads first); one CPU core and 4 GiB by
    default, ``gpu`` GPUs when the config asks for them.
    """
    options = {"policy_path": config.policy_path, "device": config.device}
    if config.n_action_steps is not None:
        options["n_action_steps"] = str(config.n_action_steps)
    if config.seed is not None:
        options["seed"] = str(config.seed)
    if config.rename_map:
        options["rename_map"] = json.dumps(config.rename_map)
    if config.allow_missing_stats:
        options["allow_missing_stats"] = "true"
    if config.max_states is not None:
        options["max_states"] = str(config.max_states)
    task = arena_server_task("lerobot", startup_timeout_s=600.0, options=options, venv=LEROBOT_VENV.name)
    more = ["--max-batch-size", str(config.max_batch_size)] if config.max_batch_size is not None else []
    return task.model_copy(update={
        "command": [*task.command, *more],
        "local_command": [*task.local_command, *more],
        "name": "lerobot",
        "image_hint": IMAGE_HINT,
        "resources": ServerResources(cpu=1, gpu=config.gpu, memory=4.0 if not config.gpu else 16.0),
        "checkpoint": config.policy_path,
    })
