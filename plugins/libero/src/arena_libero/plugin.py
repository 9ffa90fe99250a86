"""Entry point ``libero`` of group ``arena``: the environment, the scripted expert, ``arena libero``."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena_libero.env import LiberoEnvironment

    register(LiberoEnvironment.name, LiberoEnvironment)


@hookimpl
def arena_register_policies(register):
    from arena_libero.expert import LiberoPickPlaceExpert

    register(LiberoPickPlaceExpert.name, LiberoPickPlaceExpert)


@hookimpl
def arena_register_commands(app):
    from arena_libero.cli import app as libero_app

    app.add_typer(libero_app, name="libero")
