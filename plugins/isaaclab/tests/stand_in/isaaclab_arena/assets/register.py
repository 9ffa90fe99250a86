"""``register_environment``: reads the config type from ``ArenaEnvironmentFactory[Cfg]``."""

from types import get_original_bases
from typing import get_args, get_origin

from isaaclab_arena.assets.registries import EnvironmentRegistry
from isaaclab_arena.environments.arena_environment_factory import ArenaEnvironmentFactory


def register_environment(cls):
    bases = [b for b in get_original_bases(cls) if get_origin(b) is ArenaEnvironmentFactory]
    assert len(bases) == 1, f"{cls.__name__} must directly inherit ArenaEnvironmentFactory[Cfg]"
    registry = EnvironmentRegistry()
    if not registry.is_registered(cls.name, ensure_loaded=False):
        registry.register_environment(cls, get_args(bases[0])[0])
    return cls
