"""Entry point ``cosmos`` of group ``arena``: wires the policy, adapter and server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_cosmos.policy import CosmosRemotePolicy

    register(CosmosRemotePolicy.name, CosmosRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_cosmos.adapters import CosmosDroidAdapter

    register("cosmos", "droid", CosmosDroidAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_cosmos.policy import CosmosRemotePolicy
    from arena_cosmos.server import cosmos_server_task

    register(CosmosRemotePolicy.name, cosmos_server_task)
