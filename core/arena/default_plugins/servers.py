"""Reference models for arena's policy server (``arena serve NAME``)."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_servers(register):
    from arena.models.metaworld_expert import MetaWorldExpertModel

    register("metaworld-expert", MetaWorldExpertModel)
