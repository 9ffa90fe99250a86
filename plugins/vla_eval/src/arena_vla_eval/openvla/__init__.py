"""arena plugin for OpenVLA's and OpenVLA-OFT's deploy servers (HTTP ``POST /act``, json_numpy).

Public names: :class:`OpenVLARemotePolicy` (``openvla_remote``), :class:`OpenVLARemoteConfig`,
:class:`OpenVLAHttpClient`, the ``openvla`` adapters (``libero``, ``oft_libero``,
``oft_aloha``) and :func:`openvla_server_task`; :mod:`arena_vla_eval.openvla.testing` holds doubles
of both servers' HTTP contracts (needs ``fastapi`` and ``uvicorn``).
"""

from arena_vla_eval.openvla.adapters import OftAlohaAdapter, OftLiberoAdapter, OpenVLAAdapter, OpenVLALiberoAdapter
from arena_vla_eval.openvla.client import ERROR_BODY, OpenVLAHttpClient, RemoteError
from arena_vla_eval.openvla.policy import OpenVLARemoteConfig, OpenVLARemotePolicy
from arena_vla_eval.openvla.servertask import openvla_server_task

__all__ = [
    "ERROR_BODY",
    "OftAlohaAdapter",
    "OftLiberoAdapter",
    "OpenVLAAdapter",
    "OpenVLAHttpClient",
    "OpenVLALiberoAdapter",
    "OpenVLARemoteConfig",
    "OpenVLARemotePolicy",
    "RemoteError",
    "openvla_server_task",
]
