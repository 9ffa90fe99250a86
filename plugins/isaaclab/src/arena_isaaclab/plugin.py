"""Entry point ``isaaclab`` of group ``arena``: the environment, the reach expert, ``arena isaaclab``."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena_isaaclab.env import IsaacLabEnvironment

    register(IsaacLabEnvironment.name, IsaacLabEnvironment)


@hookimpl
def arena_register_policies(register):
    from arena_isaaclab.expert import ReachExpertPolicy, ReachExpertRemotePolicy

    register(ReachExpertPolicy.name, ReachExpertPolicy)
    register(ReachExpertRemotePolicy.name, ReachExpertRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_isaaclab.expert import ReachStateAdapter

    register("isaaclab_reach_expert", "reach_arm", ReachStateAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_isaaclab.expert import ReachExpertRemotePolicy, reach_expert_server_task

    register(ReachExpertRemotePolicy.name, reach_expert_server_task)


@hookimpl
def arena_register_servers(register):
    from arena_isaaclab.expert import ReachExpertModel

    register("isaaclab-reach-expert", ReachExpertModel)


@hookimpl
def arena_register_commands(app):
    from arena.venvcli import alias_app
    from arena_isaaclab.venv import VENV

    app.add_typer(alias_app(VENV, "Isaac Lab environments: the Python 3.12 venv the simulator runs in."), name="isaaclab")
