"""Entry point ``isaaclab`` of group ``arena``: the environment, the reach expert, ``arena isaaclab``."""

from arena.declare import VenvGroup, declare

declare(
    __name__,
    environments={"isaaclab": "arena_isaaclab.env:IsaacLabEnvironment"},
    policies={
        "isaaclab_reach_expert": "arena_isaaclab.expert:ReachExpertPolicy",
        "isaaclab_reach_expert_remote": "arena_isaaclab.expert:ReachExpertRemotePolicy",
    },
    adapters={("isaaclab_reach_expert", "reach_arm"): "arena_isaaclab.expert:ReachStateAdapter"},
    server_tasks={"isaaclab_reach_expert_remote": "arena_isaaclab.expert:reach_expert_server_task"},
    servers={"isaaclab-reach-expert": "arena_isaaclab.expert:ReachExpertModel"},
    commands={
        "isaaclab": VenvGroup(
            "arena_isaaclab.venv:VENV", "Isaac Lab environments: the Python 3.12 venv the simulator runs in."
        )
    },
)
