"""Entry point ``openvla`` of group ``arena``: the HTTP client, its adapters and server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_openvla.policy import OpenVLARemotePolicy

    register(OpenVLARemotePolicy.name, OpenVLARemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_openvla.policy import ADAPTERS

    for name, adapter in ADAPTERS.items():
        register("openvla", name, adapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_openvla.policy import OpenVLARemotePolicy
    from arena_openvla.servertask import openvla_server_task

    register(OpenVLARemotePolicy.name, openvla_server_task)
