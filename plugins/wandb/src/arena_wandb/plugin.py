"""Entry point ``wandb`` of group ``arena``: registers the ``wandb`` result sink."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_result_sinks(register):
    from arena_wandb.sink import WandbSink

    register("wandb", WandbSink)
