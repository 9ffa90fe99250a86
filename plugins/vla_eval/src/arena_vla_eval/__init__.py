"""arena plugin for vla-eval (vla-evaluation-harness) model servers.

Public names: :class:`VlaEvalRemotePolicy` (``vla_eval_remote``), :class:`VlaEvalRemoteConfig`,
:class:`VlaEvalClient` (vla-eval's websocket protocol), the ``vla_eval`` adapters
(``metaworld``, ``libero``, ``aloha``) and :func:`vla_eval_server_task`.
:mod:`arena_vla_eval.dummy` is a vla-eval model server with a dummy model (needs ``vla-eval``).
"""

from arena.declare import lazy_exports

# Imported on first use: every arena process loads this package's plugin module.
__getattr__ = lazy_exports(
    __name__,
    {
        "VlaEvalAdapter": "adapters",
        "VlaEvalAlohaAdapter": "adapters",
        "VlaEvalLiberoAdapter": "adapters",
        "VlaEvalMetaWorldAdapter": "adapters",
        "RemoteError": "client",
        "VlaEvalClient": "client",
        "VlaEvalRemoteConfig": "policy",
        "VlaEvalRemotePolicy": "policy",
        "vla_eval_server_task": "servertask",
    },
)

__all__ = [
    "RemoteError",
    "VlaEvalAdapter",
    "VlaEvalAlohaAdapter",
    "VlaEvalClient",
    "VlaEvalLiberoAdapter",
    "VlaEvalMetaWorldAdapter",
    "VlaEvalRemoteConfig",
    "VlaEvalRemotePolicy",
    "vla_eval_server_task",
]
