"""Entry point ``kinetix`` of group ``arena``: the environment, its baseline, ``arena kinetix``."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena_kinetix.env import KinetixEnvironment

    register(KinetixEnvironment.name, KinetixEnvironment)


@hookimpl
def arena_register_policies(register):
    from arena_kinetix.baseline import KinetixHillClimb

    register(KinetixHillClimb.name, KinetixHillClimb)


@hookimpl
def arena_register_commands(app):
    from arena.venvcli import alias_app
    from arena_kinetix.venv import VENV

    app.add_typer(alias_app(VENV, "Kinetix (kinetix-env, CPU JAX): its venv."), name="kinetix")
