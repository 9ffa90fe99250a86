"""Registers the DreamZero client, its DROID adapter and its server task."""

from arena.declare import declare

declare(
    __name__,
    policies={"dreamzero_remote": "arena_dreamzero.policy:DreamZeroRemotePolicy"},
    adapters={("dreamzero", "droid"): "arena_dreamzero.adapters:DreamZeroDroidAdapter"},
    server_tasks={"dreamzero_remote": "arena_dreamzero.servertask:dreamzero_server_task"},
)
