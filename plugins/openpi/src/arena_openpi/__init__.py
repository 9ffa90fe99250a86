"""arena plugin for openpi's pi0 and pi0.5 policies (``pi0_remote``).

Public names: :class:`~arena_openpi.policy.Pi0RemotePolicy` and its config
:class:`~arena_openpi.policy.Pi0RemoteConfig`; the adapters in :mod:`arena_openpi.adapters`;
the server task :func:`~arena_openpi.server.openpi_server_task`; test doubles in
:mod:`arena_openpi.testing`.
"""

__version__ = "0.1.0"
