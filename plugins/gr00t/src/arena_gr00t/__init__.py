"""arena plugin for NVIDIA Isaac-GR00T policy servers (native ZeroMQ protocol).

Public names: :class:`Gr00tRemotePolicy` (``gr00t_remote``), :class:`Gr00tRemoteConfig`,
:class:`Gr00tClient`, the action schedulers (``chunk``, ``synced_batch``), the DROID adapter
and, for tests, :mod:`arena_gr00t.testing` (a GR00T server double).
"""

from arena_gr00t.adapters import Gr00tAdapter, Gr00tDroidAdapter
from arena_gr00t.client import Gr00tClient, Gr00tServerError
from arena_gr00t.policy import Gr00tRemoteConfig, Gr00tRemotePolicy
from arena_gr00t.schedulers import ChunkScheduler, SyncedBatchScheduler, make_scheduler

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
