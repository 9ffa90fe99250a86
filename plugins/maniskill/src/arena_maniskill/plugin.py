"""Entry point ``maniskill`` of group ``arena``: the ManiSkill3 environment, ``arena maniskill``."""

from arena.hookspecs import hookimpl


@hookimpl
def arena_register_environments(register):
    from arena_maniskill.env import ManiSkillEnvironment

    register(ManiSkillEnvironment.name, ManiSkillEnvironment)


@hookimpl
def arena_register_commands(app):
    from arena.venvcli import alias_app
    from arena_maniskill.venv import VENV

    app.add_typer(alias_app(VENV, "ManiSkill3 (mani-skill 3.0.1): its venv."), name="maniskill")
