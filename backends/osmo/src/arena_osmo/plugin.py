"""Registers the ``osmo`` launch backend (entry point ``arena: osmo``)."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_launch_backends(register):
    from arena_osmo.backend import OsmoBackend

    register("osmo", OsmoBackend)
