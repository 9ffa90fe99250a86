"""Entry point ``aloha`` of group ``arena``: the environment, the scripted expert, ``arena aloha``."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena_aloha.env import AlohaEnvironment

    register(AlohaEnvironment.name, AlohaEnvironment)


@hookimpl
def arena_register_policies(register):
    from arena_aloha.expert import AlohaTransferCubeExpert

    register(AlohaTransferCubeExpert.name, AlohaTransferCubeExpert)


@hookimpl
def arena_register_commands(app):
    from arena_aloha.cli import app as aloha_app

    app.add_typer(aloha_app, name="aloha")
