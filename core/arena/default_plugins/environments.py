"""Built-in CPU simulators."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena.envs.franka_kitchen import FrankaKitchenEnvironment
    from arena.envs.metaworld import MetaWorldEnvironment

    register("metaworld", MetaWorldEnvironment)
    register("franka_kitchen", FrankaKitchenEnvironment)
