"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, the
LeRobot embodiment adapters, export.

Each part of the plugin registers under a named hookimpl (``specname``), so the parts sit
beside each other (two plain functions of one hook name in one module would replace each other).
"""

from arena.hookspecs import hookimpl

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


# -- PushT (arena_lerobot.pusht): the environment `pusht`, its scripted expert -----------------


@hookimpl(specname="arena_register_environments")
def register_pusht_environment(register):
    from arena_lerobot.pusht.env import PushTEnvironment

    register(PushTEnvironment.name, PushTEnvironment)


@hookimpl(specname="arena_register_policies")
def register_pusht_expert(register):
    from arena_lerobot.pusht.expert import PushTExpert

    register(PushTExpert.name, PushTExpert)


# -- the LeRobot environment bridge (arena_lerobot.bridge): `lerobot_env` ----------------------


@hookimpl(specname="arena_register_environments")
def register_lerobot_env_bridge(register):
    from arena_lerobot.bridge import LeRobotEnvironment

    register(LeRobotEnvironment.name, LeRobotEnvironment)


# -- embodiment adapters (arena_lerobot.adapters): family `lerobot` --------------------------


@hookimpl(specname="arena_register_embodiment_adapters")
def register_lerobot_adapters(register):
    from arena_lerobot.adapters import ADAPTERS, FAMILY

    for name, cls in ADAPTERS.items():
        register(FAMILY, name, cls)


# -- arena export lerobot (arena_lerobot.export): recorded episodes as a LeRobotDataset ----------


@hookimpl(specname="arena_register_commands")
def register_export_command(app):
    from arena.exporters import export_group
    from arena_lerobot.exportcli import export_lerobot

    export_group(app).command("lerobot")(export_lerobot)
