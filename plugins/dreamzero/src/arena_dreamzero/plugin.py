"""Registers the DreamZero client, its DROID adapter and its server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_dreamzero.policy import DreamZeroRemotePolicy

    register("dreamzero_remote", DreamZeroRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_dreamzero.adapters import DreamZeroDroidAdapter

    register("dreamzero", "droid", DreamZeroDroidAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_dreamzero.servertask import dreamzero_server_task

    register("dreamzero_remote", dreamzero_server_task)
