"""Registers the ``slurm`` launch backend (imported when a run uses it)."""

from arena.declare import declare

declare(__name__, launch_backends={"slurm": "arena_slurm.backend:SlurmBackend"})
