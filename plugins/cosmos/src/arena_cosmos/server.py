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

#: No public image of the Cosmos policy server exists: container backends need the user's
#: own, with the checkpoint baked in at :data:`BAKED_CHECKPOINT`.
COSMOS_IMAGE_HINT = (
    "no public Cosmos policy server image exists: build one with cosmos_framework installed and the "
    "Cosmos3-Edge-Policy-DROID checkpoint at /workspace/baked_checkpoint, push it to a registry the cluster can pull from"
)
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
        image=None,
        image_hint=COSMOS_IMAGE_HINT,
        command=["python", *_SERVE],
        local_command=["{cosmos_python}", *_SERVE],
        port=8000,
        readiness="websocket",
        startup_timeout_s=1800.0,
        resources=ServerResources(cpu=4, gpu=1, memory=32.0, storage=40.0),  # Hugging Face cache
        secrets=["HF_TOKEN"],
        shareable=True,
        checkpoint="{checkpoint}",
        fields={"checkpoint": BAKED_CHECKPOINT, "cosmos_python": "python"},
    )
