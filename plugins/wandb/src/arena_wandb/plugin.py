"""Entry point ``wandb`` of group ``arena``: registers the ``wandb`` result sink."""

from arena.declare import declare

declare(__name__, result_sinks={"wandb": "arena_wandb.sink:WandbSink"})
