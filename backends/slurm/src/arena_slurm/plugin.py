"""Registers the ``slurm`` launch backend."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_launch_backends(register):
    from arena_slurm.backend import SlurmBackend

    register("slurm", SlurmBackend)
