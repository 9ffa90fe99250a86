"""Registers the GR00T client, its DROID adapter and its server task."""

from arena.declare import declare

declare(
    __name__,
    policies={"gr00t_remote": "arena_gr00t.policy:Gr00tRemotePolicy"},
    adapters={("gr00t", "droid"): "arena_gr00t.adapters:Gr00tDroidAdapter"},
    server_tasks={"gr00t_remote": "arena_gr00t.servertask:gr00t_server_task"},
)
