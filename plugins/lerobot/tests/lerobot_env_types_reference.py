"""What LeRobot's env-config registry holds, read in the ``lerobot`` venv, for
``test_lerobot_env_types.py`` to compare with ``arena_lerobot.envtypes`` (which arena's own
interpreter reads without LeRobot).

    python lerobot_env_types_reference.py [--plugin PKG TYPE] TYPE [TYPE ...]

``TYPE``: the types whose ignored fields to find. Prints one JSON line::

    {"lerobot": "0.6.1",
     "builtin": {type: {"fields": [...], "processors": bool}},          # before any plugin
     "third_party": {type: {"fields": [...], "distribution": "name==version"}},  # register_third_party_plugins()
     "ignored": {type: [field, ...]},     # changing the field leaves what builds the env unchanged
     "gym_manipulator_make_env": "ExceptionClass",
     "plugin": {...}}                     # with --plugin, after the rest (see bridge_with_plugin)

"What builds the env": for a config that keeps ``EnvConfig.create_envs``, ``gym.make``'s id, its
``disable_env_checker`` and ``gym_kwargs`` (that method passes nothing else); for one that
overrides it, the keyword arguments it hands ``lerobot.envs.<type>.create_<type>_envs``
(replaced here by a function that records them: no env is built). A field is changed to another
value of its kind (``not`` a bool, ``+1`` a number, a suffix on a string, one more key in a
dict); a change the config refuses (``__post_init__`` raising) counts as read.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import sys
from typing import Any


class _Captured(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.kwargs = kwargs


def init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_other"
    if isinstance(value, dict):
        return {**value, "_other": next(iter(value.values()), None)}
    if isinstance(value, (list, tuple)):
        return type(value)([*value, *value[:1]]) if value else type(value)(["_other"])
    if value is None:
        return "_other"
    raise TypeError(f"no other value for {value!r}")


def builder_input(cfg: Any) -> str:
    """What LeRobot builds ``cfg``'s env from (see the module docstring), as text."""
    from lerobot.envs.configs import EnvConfig

    if type(cfg).create_envs is EnvConfig.create_envs:
        return repr((cfg.gym_id, cfg.disable_env_checker, cfg.gym_kwargs))
    module = importlib.import_module(f"lerobot.envs.{cfg.type}")
    name = f"create_{cfg.type}_envs"
    original = getattr(module, name)

    def record(*args: Any, **kwargs: Any) -> None:
        raise _Captured({"args": args, **kwargs})

    setattr(module, name, record)
    try:
        cfg.create_envs(n_envs=1, use_async_envs=False)
    except _Captured as captured:
        return repr(sorted(captured.kwargs.items()))
    finally:
        setattr(module, name, original)
    raise AssertionError(f"{type(cfg).__name__}.create_envs did not call {name}")


def ignored_fields(cls: type) -> list[str]:
    base = builder_input(cls())
    ignored = []
    for field in init_fields(cls):
        default = getattr(cls(), field)
        try:
            changed = cls(**{field: _other(default)})
        except (ValueError, TypeError):
            continue  # refused: read by the config itself
        if builder_input(changed) == base:
            ignored.append(field)
    return ignored


def bridge_with_plugin(package: str, kind: str) -> dict[str, Any]:
    """What the ``lerobot_env`` bridge (this checkout's, on ``PYTHONPATH``) does with type ``kind``,
    which only ``package`` registers, named by ``discover_packages_path``: one env built, reset
    and stepped; the same package with a type it does not register, with a field the type's
    config does not have, and a package that does not exist (``[exception class, message]``)."""
    import numpy as np

    from arena_lerobot.bridge import LeRobotEnvConfig, LeRobotEnvironment

    def build(**env: Any) -> LeRobotEnvironment:
        config = LeRobotEnvConfig(env={"type": kind, "discover_packages_path": package, **env})
        return LeRobotEnvironment(config, num_envs=1)

    env = build(episode_length=3)
    try:
        obs = env.reset_envs([0], [5])
        _, reward, terminated, truncated, _ = env.step(np.ones((1, env.action_dim)))
        result = {
            "state": np.asarray(obs["policy"]["observation.state"]).tolist(),
            "reward": reward.tolist(),
            "max_episode_steps": env.default_max_episode_steps,
            "protocol_plugin": env.protocol().get("discover_packages_path"),
        }
    finally:
        env.close()
    attempts = {
        "other_type": lambda: build(type="not_" + kind),
        "bad_field": lambda: build(colour=1),
        "missing_package": lambda: build(discover_packages_path="arena_no_such_package"),
    }
    for name, attempt in attempts.items():
        try:
            attempt().close()
            result[name] = None
        except Exception as exc:
            result[name] = [type(exc).__name__, str(exc)]
    return result


def main(types: list[str], plugin: tuple[str, str] | None = None) -> dict[str, Any]:
    from lerobot.envs.configs import EnvConfig
    from lerobot.envs.factory import make_env, make_env_config
    from lerobot.utils.import_utils import register_third_party_plugins

    builtin = {}
    for name, cls in sorted(EnvConfig.get_known_choices().items()):
        pre, post = cls().get_env_processors()
        builtin[name] = {"fields": init_fields(cls), "processors": bool(pre.steps) or bool(post.steps)}
    register_third_party_plugins()
    owners = importlib.metadata.packages_distributions()
    third_party = {}
    for name, cls in sorted(EnvConfig.get_known_choices().items()):
        if name in builtin:
            continue
        dist = owners[cls.__module__.split(".")[0]][0]
        third_party[name] = {"fields": init_fields(cls), "distribution": f"{dist}=={importlib.metadata.version(dist)}"}
    ignored = {name: ignored_fields(EnvConfig.get_choice_class(name)) for name in types}
    try:
        make_env(make_env_config("gym_manipulator"), n_envs=1)
        manipulator = None
    except Exception as exc:  # what make_env does with a real robot's config
        manipulator = type(exc).__name__
    return {
        "lerobot": importlib.metadata.version("lerobot"),
        "builtin": builtin,
        "third_party": third_party,
        "ignored": ignored,
        "gym_manipulator_make_env": manipulator,
        "plugin": bridge_with_plugin(*plugin) if plugin else None,
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    plugin = None
    if args[:1] == ["--plugin"]:
        plugin, args = (args[1], args[2]), args[3:]
    print(json.dumps(main(args, plugin)))
