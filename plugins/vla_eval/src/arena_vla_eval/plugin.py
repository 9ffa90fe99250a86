"""Entry point ``vla_eval`` of group ``arena``: two clients, their adapters and server tasks.

``vla_eval_remote`` speaks vla-eval's websocket protocol; ``openvla_remote`` the HTTP
``/act`` contract of OpenVLA's and OpenVLA-OFT's deploy servers (:mod:`arena_vla_eval.openvla`).
"""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_vla_eval.openvla.policy import OpenVLARemotePolicy
    from arena_vla_eval.policy import VlaEvalRemotePolicy

    register(VlaEvalRemotePolicy.name, VlaEvalRemotePolicy)
    register(OpenVLARemotePolicy.name, OpenVLARemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_vla_eval.adapters import VlaEvalAlohaAdapter, VlaEvalLiberoAdapter, VlaEvalMetaWorldAdapter
    from arena_vla_eval.openvla.policy import ADAPTERS

    register("vla_eval", "metaworld", VlaEvalMetaWorldAdapter)
    register("vla_eval", "libero", VlaEvalLiberoAdapter)
    register("vla_eval", "aloha", VlaEvalAlohaAdapter)
    for name, adapter in ADAPTERS.items():
        register("openvla", name, adapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_vla_eval.openvla.policy import OpenVLARemotePolicy
    from arena_vla_eval.openvla.servertask import openvla_server_task
    from arena_vla_eval.policy import VlaEvalRemotePolicy
    from arena_vla_eval.servertask import vla_eval_server_task

    register(VlaEvalRemotePolicy.name, vla_eval_server_task)
    register(OpenVLARemotePolicy.name, openvla_server_task)
