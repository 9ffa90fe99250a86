"""Entry point ``maniskill`` of group ``arena``: the ManiSkill3 environment, its push-cube
state policy and model, the motion-planning expert, the DROID adapter path, ``arena maniskill``."""

from arena.hookspecs import hookimpl
from arena.declare import VenvGroup, declare

declare(
    __name__,
    environments={"maniskill": "arena_maniskill.env:ManiSkillEnvironment"},
    policies={
        "maniskill_push_cube_remote": "arena_maniskill.pushcube:PushCubeRemotePolicy",
        "maniskill_motion_planner": "arena_maniskill.expert:MotionPlannerExpert",
    },
    adapters={("maniskill_push_cube", "push_cube_state"): "arena_maniskill.pushcube:PushCubeStateAdapter"},
    server_tasks={"maniskill_push_cube_remote": "arena_maniskill.pushcube:push_cube_server_task"},
    servers={"maniskill-push-cube": "arena_maniskill.pushcube:PushCubeModel"},
    commands={"maniskill": VenvGroup("arena_maniskill.venv:VENV", "ManiSkill3 (mani-skill 3.0.1): its venv.")},
)


@hookimpl(specname="arena_register_embodiment_adapters")
def register_droid_adapter(register):
    """Only where the openpi plugin is installed: its policy ``pi0_remote`` uses the adapter."""
    from importlib.util import find_spec

    if find_spec("arena_openpi") is None:  # its adapters serve openpi_remote (no import of it)
        return
    from arena_maniskill.droid import ManiSkillDroidAdapter

    register("openpi", "maniskill_droid", ManiSkillDroidAdapter)
