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


@hookimpl
def arena_register_policies(register):
    from arena_maniskill.pushcube import PushCubeRemotePolicy

    register(PushCubeRemotePolicy.name, PushCubeRemotePolicy)


@hookimpl
def arena_register_embodiment_adapters(register):
    from arena_maniskill.pushcube import PushCubeStateAdapter

    register("maniskill_push_cube", "push_cube_state", PushCubeStateAdapter)


@hookimpl
def arena_register_server_tasks(register):
    from arena_maniskill.pushcube import PushCubeRemotePolicy, push_cube_server_task

    register(PushCubeRemotePolicy.name, push_cube_server_task)


@hookimpl
def arena_register_servers(register):
    from arena_maniskill.pushcube import PushCubeModel

    register("maniskill-push-cube", PushCubeModel)


# -- ManiSkill's motion-planning experts and the DROID adapter path --------------------------
# (named apart from the environment's hook implementations, with pluggy's ``specname``, so
# both blocks can live in this module)


@hookimpl(specname="arena_register_policies")
def register_motion_planner_expert(register):
    from arena_maniskill.expert import MotionPlannerExpert

    register(MotionPlannerExpert.name, MotionPlannerExpert)


@hookimpl(specname="arena_register_embodiment_adapters")
def register_droid_adapter(register):
    from importlib.util import find_spec

    if find_spec("arena_openpi") is None:  # its adapters serve openpi_remote (no import of it)
        return
    from arena_maniskill.droid import ManiSkillDroidAdapter

    register("openpi", "maniskill_droid", ManiSkillDroidAdapter)
