"""arena plugin for DreamZero world-action-model servers (RoboArena-style session protocol).

Public names: :class:`DreamZeroRemotePolicy` (``dreamzero_remote``),
:class:`DreamZeroRemoteConfig`, :class:`DreamZeroClient`, the DROID adapter and, for tests,
:mod:`arena_dreamzero.testing` (a DreamZero server double).
"""

from arena.declare import lazy_exports

# Imported on first use: every arena process loads this package's plugin module.
__getattr__ = lazy_exports(
    __name__,
    {
        "DreamZeroAdapter": "adapters",
        "DreamZeroDroidAdapter": "adapters",
        "RESET_ACK": "client",
        "DreamZeroClient": "client",
        "ServerConfig": "client",
        "DreamZeroRemoteConfig": "policy",
        "DreamZeroRemotePolicy": "policy",
    },
)

__all__ = [
    "RESET_ACK",
    "DreamZeroAdapter",
    "DreamZeroClient",
    "DreamZeroDroidAdapter",
    "DreamZeroRemoteConfig",
    "DreamZeroRemotePolicy",
    "ServerConfig",
]
