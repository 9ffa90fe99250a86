"""arena plugin for Cosmos policies served over the openpi protocol (``cosmos_remote``).

Public names: :class:`~arena_cosmos.policy.CosmosRemotePolicy` and its config
:class:`~arena_cosmos.policy.CosmosRemoteConfig`; the adapter
:class:`~arena_cosmos.adapters.CosmosDroidAdapter`; the server task
:func:`~arena_cosmos.server.cosmos_server_task`; the test double in :mod:`arena_cosmos.testing`.
"""

__version__ = "0.1.0"
