"""Registers the GR00T client, its DROID adapter and its server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_gr00t.policy import Gr00tRemotePolicy

    register("gr00t_remote", Gr00tRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_gr00t.adapters import Gr00tDroidAdapter

    register("gr00t", "droid", Gr00tDroidAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_gr00t.servertask import gr00t_server_task

    register("gr00t_remote", gr00t_server_task)
