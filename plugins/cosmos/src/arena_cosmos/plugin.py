"""Entry point ``cosmos`` of group ``arena``: wires the policy, adapter and server task."""

from arena.declare import declare

declare(
    __name__,
    policies={"cosmos_remote": "arena_cosmos.policy:CosmosRemotePolicy"},
    adapters={("cosmos", "droid"): "arena_cosmos.adapters:CosmosDroidAdapter"},
    server_tasks={"cosmos_remote": "arena_cosmos.server:cosmos_server_task"},
)
