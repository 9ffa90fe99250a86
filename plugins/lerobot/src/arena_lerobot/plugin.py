"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl

# Each part of the plugin registers under a named hookimpl (``specname``), so the parts add
# theirs beside each other.

# -- serving (arena_lerobot.model, .policy, .servertask): `arena serve lerobot`, `lerobot_remote`


@hookimpl(specname="arena_register_servers")
def register_lerobot_server(register):
    from arena_lerobot.model import LeRobotModel

    register("lerobot", LeRobotModel)


@hookimpl(specname="arena_register_policies")
def register_lerobot_remote(register):
    from arena_lerobot.policy import LeRobotRemotePolicy

    register(LeRobotRemotePolicy.name, LeRobotRemotePolicy)


@hookimpl(specname="arena_register_server_tasks")
def register_lerobot_remote_server_task(register):
    from arena_lerobot.policy import LeRobotRemotePolicy
    from arena_lerobot.servertask import lerobot_server_task

    register(LeRobotRemotePolicy.name, lerobot_server_task)
