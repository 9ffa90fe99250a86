"""arena-plugin-wandb: the ``wandb`` result sink (:mod:`arena_wandb.sink`)."""
