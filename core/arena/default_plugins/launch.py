"""The built-in ``local`` launch backend."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_launch_backends(register):
    from arena.launch.local import LocalBackend

    register("local", LocalBackend)
