"""Built-in policies, the Meta-World embodiment adapter and the expert's server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena.policies.metaworld_expert import MetaWorldExpertRemotePolicy
    from arena.policies.simple import RandomActionPolicy, ReplayPolicy, ZeroActionPolicy

    register("zero_action", ZeroActionPolicy)
    register("random_action", RandomActionPolicy)
    register("replay", ReplayPolicy)
    register("metaworld_expert_remote", MetaWorldExpertRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena.policies.metaworld_expert import MetaWorldStateAdapter

    register("metaworld_expert", "metaworld", MetaWorldStateAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena.policies.metaworld_expert import metaworld_expert_server_task

    register("metaworld_expert_remote", metaworld_expert_server_task)
