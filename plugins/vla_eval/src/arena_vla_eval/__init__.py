"""arena plugin for vla-eval (vla-evaluation-harness) model servers.

Public names: :class:`VlaEvalRemotePolicy` (``vla_eval_remote``), :class:`VlaEvalRemoteConfig`,
:class:`VlaEvalClient` (vla-eval's websocket protocol), the ``vla_eval`` adapters
(``metaworld``, ``libero``, ``aloha``) and :func:`vla_eval_server_task`.
:mod:`arena_vla_eval.dummy` is a vla-eval model server with a dummy model (needs ``vla-eval``).
"""

from arena_vla_eval.adapters import VlaEvalAdapter, VlaEvalAlohaAdapter, VlaEvalLiberoAdapter, VlaEvalMetaWorldAdapter
from arena_vla_eval.client import RemoteError, VlaEvalClient
from arena_vla_eval.policy import VlaEvalRemoteConfig, VlaEvalRemotePolicy
from arena_vla_eval.servertask import vla_eval_server_task

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
