"""Entry point ``openpi`` of group ``arena``: wires the policy, adapters and server task."""

from arena.declare import declare

declare(
    __name__,
    policies={"pi0_remote": "arena_openpi.policy:Pi0RemotePolicy"},
    adapters={
        ("openpi", "droid"): "arena_openpi.adapters:OpenPIDroidAdapter",
        ("openpi", "libero"): "arena_openpi.adapters:OpenPILiberoAdapter",
        ("openpi", "aloha"): "arena_openpi.adapters:OpenPIAlohaAdapter",
    },
    server_tasks={"pi0_remote": "arena_openpi.server:openpi_server_task"},
)
