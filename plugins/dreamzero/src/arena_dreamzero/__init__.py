"""arena plugin for DreamZero world-action-model servers (RoboArena-style session protocol).

Public names: :class:`DreamZeroRemotePolicy` (``dreamzero_remote``),
:class:`DreamZeroRemoteConfig`, :class:`DreamZeroClient`, the DROID adapter and, for tests,
:mod:`arena_dreamzero.testing` (a DreamZero server double).
"""

from arena_dreamzero.adapters import DreamZeroAdapter, DreamZeroDroidAdapter
from arena_dreamzero.client import RESET_ACK, DreamZeroClient, ServerConfig
from arena_dreamzero.policy import DreamZeroRemoteConfig, DreamZeroRemotePolicy

__all__ = [
    "RESET_ACK",
    "DreamZeroAdapter",
    "DreamZeroClient",
    "DreamZeroDroidAdapter",
    "DreamZeroRemoteConfig",
    "DreamZeroRemotePolicy",
    "ServerConfig",
]
