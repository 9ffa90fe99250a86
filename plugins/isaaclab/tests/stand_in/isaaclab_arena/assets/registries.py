"""Registries (IsaacLab-Arena's interface; singletons)."""

from __future__ import annotations

from typing import Any


class Registry:
    _instances: dict[type, Any] = {}

    def __new__(cls):
        if cls not in Registry._instances:
            instance = super().__new__(cls)
            instance._components = {}
            Registry._instances[cls] = instance
        return Registry._instances[cls]

    def register(self, component: Any, key: str) -> None:
        assert key not in self._components, f"component {key} already registered"
        self._components[key] = component

    def is_registered(self, key: str, ensure_loaded: bool = True) -> bool:
        if ensure_loaded:
            ensure_assets_registered()
        return key in self._components

    def get_component_by_name(self, key: str) -> Any:
        ensure_assets_registered()
        assert key in self._components, f"component {key} not found, please check if requested component is registered"
        return self._components[key]

    def get_all_keys(self) -> list[str]:
        ensure_assets_registered()
        return list(self._components)


class EnvironmentRegistry(Registry):
    """Environment factories and the config type each consumes."""

    def register_environment(self, factory_type: type, cfg_type: type) -> None:
        self.register(factory_type, factory_type.name)
        self.__dict__.setdefault("_cfg_types", {})[factory_type] = cfg_type

    def get_environment_cfg_type(self, factory_type: type) -> type:
        ensure_assets_registered()
        return self.__dict__["_cfg_types"][factory_type]


def ensure_assets_registered() -> None:
    import isaaclab_arena.environments.droid_cube_stand_in  # noqa: F401
