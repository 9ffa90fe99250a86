"""Entry point ``vla_eval`` of group ``arena``: two clients, their adapters and server tasks.

``vla_eval_remote`` speaks vla-eval's websocket protocol; ``openvla_remote`` the HTTP
``/act`` contract of OpenVLA's and OpenVLA-OFT's deploy servers (:mod:`arena_vla_eval.openvla`).
"""

from arena.declare import declare

declare(
    __name__,
    policies={
        "vla_eval_remote": "arena_vla_eval.policy:VlaEvalRemotePolicy",
        "openvla_remote": "arena_vla_eval.openvla.policy:OpenVLARemotePolicy",
    },
    adapters={
        ("vla_eval", "metaworld"): "arena_vla_eval.adapters:VlaEvalMetaWorldAdapter",
        ("vla_eval", "libero"): "arena_vla_eval.adapters:VlaEvalLiberoAdapter",
        ("vla_eval", "aloha"): "arena_vla_eval.adapters:VlaEvalAlohaAdapter",
        "openvla": "arena_vla_eval.openvla.policy:ADAPTERS",
    },
    server_tasks={
        "vla_eval_remote": "arena_vla_eval.servertask:vla_eval_server_task",
        "openvla_remote": "arena_vla_eval.openvla.servertask:openvla_server_task",
    },
)
