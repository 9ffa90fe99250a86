"""Built-in CPU simulators."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena.envs.metaworld import MetaWorldEnvironment

    register("metaworld", MetaWorldEnvironment)
