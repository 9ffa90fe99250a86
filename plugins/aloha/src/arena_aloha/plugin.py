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
    from arena.venvcli import alias_app
    from arena_aloha.venv import VENV

    app.add_typer(alias_app(VENV, "The ALOHA sim benchmark (gym-aloha): its venv."), name="aloha")
