"""Entry point ``maniskill`` of group ``arena``: the ManiSkill3 environment and its experts."""

from arena.hookspecs import hookimpl

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

    if find_spec("arena_openpi") is None:  # the DROID adapter builds on openpi's
        return
    from arena_maniskill.droid import ManiSkillDroidAdapter

    register("openpi", "maniskill_droid", ManiSkillDroidAdapter)
