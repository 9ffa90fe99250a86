"""Registers the ``ray`` launch backend."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_launch_backends(register):
    from arena_ray.backend import RayBackend

    register("ray", RayBackend)
