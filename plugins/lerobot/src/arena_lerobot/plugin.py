"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl  # noqa: F401  (the hook implementations follow)


# -- PushT (arena_lerobot.pusht): the environment `pusht`, its scripted expert -----------------
# Named by `specname`, so that other parts of this plugin register their policies under the same
# hooks with functions of their own names.


@hookimpl(specname="arena_register_environments")
def register_pusht_environment(register):
    from arena_lerobot.pusht.env import PushTEnvironment

    register(PushTEnvironment.name, PushTEnvironment)


@hookimpl(specname="arena_register_policies")
def register_pusht_expert(register):
    from arena_lerobot.pusht.expert import PushTExpert

    register(PushTExpert.name, PushTExpert)

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
