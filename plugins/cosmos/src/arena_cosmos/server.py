"""The Cosmos server task: ``cosmos_framework``'s robolab action-policy server.

Command (``reference/isaaclab-arena.md`` section 3.2), inside the server image whose
checkpoint is baked in at ``/workspace/baked_checkpoint``::

    python -m cosmos_framework.scripts.action_policy_server_robolab \\
        --checkpoint_path CKPT --port P --format-prompt-as-json True

One GPU; ``HF_TOKEN`` is passed through by name (``nvidia/Cosmos3-Edge-Policy-DROID`` is
gated). Loading and the first inference take minutes, so ``startup_timeout_s`` is 30 minutes
and the client waits 15 minutes for its first reply (``ping_timeout_s`` 300 s).

Override per run with ``server:``, e.g. ``server: {fields: {checkpoint: /ckpt, python:
/opt/cosmos/bin/python}}`` to run it with the local backend.
"""

from __future__ import annotations

from arena.servertask import ServerResources, ServerTask

#: Container image of the Cosmos policy server, checkpoint baked in.
COSMOS_SERVER_IMAGE = "cosmos-policy-server:latest"
#: Where the image holds the checkpoint.
BAKED_CHECKPOINT = "/workspace/baked_checkpoint"

_SERVE = [
    "-m",
    "cosmos_framework.scripts.action_policy_server_robolab",
    "--checkpoint_path",
    "{checkpoint}",
    "--port",
    "{port}",
    "--format-prompt-as-json",
    "True",
]


def cosmos_server_task(config) -> ServerTask:
    """The ServerTask of a :class:`~arena_cosmos.policy.CosmosRemoteConfig` (one server serves all)."""
    return ServerTask(
        name=f"cosmos-{config.embodiment}",
        image=COSMOS_SERVER_IMAGE,
        command=["python", *_SERVE],
        local_command=["{cosmos_python}", *_SERVE],
        port=8000,
        readiness="websocket",
        startup_timeout_s=1800.0,
        resources=ServerResources(cpu=4, gpu=1, memory=32.0),
        secrets=["HF_TOKEN"],
        shareable=True,
        checkpoint="{checkpoint}",
        fields={"checkpoint": BAKED_CHECKPOINT, "cosmos_python": "python"},
    )
