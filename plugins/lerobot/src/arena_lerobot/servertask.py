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

    ``reference_exact`` (README, "Reference-exact serving") adds ``--max-batch-size 1`` and
    ``-o torch_threads=1`` with ``OMP_NUM_THREADS=1`` in the server's environment (``torch_threads``
    chooses another count).

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
    threads = config.server_torch_threads()
    if threads is not None:
        options["torch_threads"] = str(threads)
    task = arena_server_task("lerobot", startup_timeout_s=600.0, options=options, venv=LEROBOT_VENV.name)
    batch = config.server_batch_size()
    more = ["--max-batch-size", str(batch)] if batch is not None else []
    # OMP_NUM_THREADS too: torch reads it when imported, and numpy's BLAS (the processors' stats) does
    env = {**task.env, "OMP_NUM_THREADS": str(threads)} if threads is not None else task.env
    return task.model_copy(update={
        "command": [*task.command, *more],
        "local_command": [*task.local_command, *more],
        "env": env,
        "name": "lerobot",
        "image_hint": IMAGE_HINT,
        "resources": ServerResources(cpu=1, gpu=config.gpu, memory=4.0 if not config.gpu else 16.0),
        "checkpoint": config.policy_path,
    })
