"""arena plugin for NVIDIA Isaac-GR00T policy servers (native ZeroMQ protocol).

Public names: :class:`Gr00tRemotePolicy` (``gr00t_remote``), :class:`Gr00tRemoteConfig`,
:class:`Gr00tClient`, the action schedulers (``chunk``, ``synced_batch``), the DROID adapter
and, for tests, :mod:`arena_gr00t.testing` (a GR00T server double).
"""

from arena.declare import lazy_exports

# Imported on first use: every arena process loads this package's plugin module.
__getattr__ = lazy_exports(
    __name__,
    {
        "Gr00tAdapter": "adapters",
        "Gr00tDroidAdapter": "adapters",
        "Gr00tClient": "client",
        "Gr00tServerError": "client",
        "Gr00tRemoteConfig": "policy",
        "Gr00tRemotePolicy": "policy",
        "ChunkScheduler": "schedulers",
        "SyncedBatchScheduler": "schedulers",
        "make_scheduler": "schedulers",
    },
)

__all__ = [
    "ChunkScheduler",
    "Gr00tAdapter",
    "Gr00tClient",
    "Gr00tDroidAdapter",
    "Gr00tRemoteConfig",
    "Gr00tRemotePolicy",
    "Gr00tServerError",
    "SyncedBatchScheduler",
    "make_scheduler",
]
