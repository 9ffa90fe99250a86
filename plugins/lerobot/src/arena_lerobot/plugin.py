"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_policies(register):
    from arena_lerobot.policy import LeRobotRemotePolicy

    register(LeRobotRemotePolicy.name, LeRobotRemotePolicy)


@hookimpl
def arena_register_server_tasks(register):
    from arena_lerobot.policy import LeRobotRemotePolicy
    from arena_lerobot.servertask import lerobot_server_task

    register(LeRobotRemotePolicy.name, lerobot_server_task)


@hookimpl
def arena_register_servers(register):
    from arena_lerobot.model import LeRobotModel

    register("lerobot", LeRobotModel)
