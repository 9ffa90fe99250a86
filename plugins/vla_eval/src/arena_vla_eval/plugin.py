"""Entry point ``vla_eval`` of group ``arena``: the client, its adapters and its server task."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_vla_eval.policy import VlaEvalRemotePolicy

    register(VlaEvalRemotePolicy.name, VlaEvalRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_vla_eval.adapters import VlaEvalAlohaAdapter, VlaEvalLiberoAdapter, VlaEvalMetaWorldAdapter

    register("vla_eval", "metaworld", VlaEvalMetaWorldAdapter)
    register("vla_eval", "libero", VlaEvalLiberoAdapter)
    register("vla_eval", "aloha", VlaEvalAlohaAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_vla_eval.policy import VlaEvalRemotePolicy
    from arena_vla_eval.servertask import vla_eval_server_task

    register(VlaEvalRemotePolicy.name, vla_eval_server_task)
