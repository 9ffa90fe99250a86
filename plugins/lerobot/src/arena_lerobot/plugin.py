"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_commands(app):
    from arena.exporters import export_group
    from arena_lerobot.exportcli import export_lerobot

    export_group(app).command("lerobot")(export_lerobot)
