"""Entry point ``openpi`` of group ``arena``: wires the policy, adapters and server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_openpi.policy import Pi0RemotePolicy

    register(Pi0RemotePolicy.name, Pi0RemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_openpi.adapters import OpenPIAlohaAdapter, OpenPIDroidAdapter, OpenPILiberoAdapter

    register("openpi", "droid", OpenPIDroidAdapter)
    register("openpi", "libero", OpenPILiberoAdapter)
    register("openpi", "aloha", OpenPIAlohaAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_openpi.policy import Pi0RemotePolicy
    from arena_openpi.server import openpi_server_task

    register(Pi0RemotePolicy.name, openpi_server_task)
