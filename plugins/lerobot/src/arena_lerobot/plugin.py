"""Entry point ``lerobot`` of group ``arena``: LeRobot serving, the PushT environment, export."""

from arena.hookspecs import hookimpl  # noqa: F401  (the hook implementations follow)


# -- embodiment adapters (arena_lerobot.adapters): family `lerobot` --------------------------


@hookimpl(specname="arena_register_embodiment_adapters")
def register_lerobot_adapters(register):
    from arena_lerobot.adapters import ADAPTERS, FAMILY

    for name, cls in ADAPTERS.items():
        register(FAMILY, name, cls)
