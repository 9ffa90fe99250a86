"""The LeRobot env configs ``lerobot_env`` knows without importing LeRobot: their types, their
fields, and the fields LeRobot accepts but the env never reads, so that ``arena validate`` (in
arena's interpreter, where LeRobot is not installed) refuses a mistyped type or field with the
file, the run and the key, before any server or worker starts.

Source: LeRobot 0.6.1's ``lerobot/envs/configs.py`` (the ``EnvConfig.register_subclass`` names
and the dataclass fields of each), and lerobot-env-so101 0.4.0's ``configuration_so101.py``,
the two pinned in the ``lerobot`` venv (``model-venv.txt``). ``tests/test_lerobot_env_types.py``
compares every table here with LeRobot's registry in that venv (``EnvConfig.get_known_choices()``
before and after ``register_third_party_plugins()``), so a new LeRobot pin that adds, removes or
changes a type fails that test instead of drifting.

Third-party types. ``lerobot-eval`` 0.6.1 registers env types two ways: at start-up
``register_third_party_plugins()`` imports every installed distribution whose name starts with
``lerobot_env_`` (``lerobot/utils/import_utils.py``), and ``--env.discover_packages_path=PKG``
imports package ``PKG`` and each of its submodules (``lerobot/configs/parser.py``,
``load_plugin``). A package registers a type of any name (lerobot-env-so101's is ``so101``), so
the name cannot be told from the package without importing it, in the venv. The rule here: a
type is accepted when it is LeRobot 0.6.1's (:data:`LEROBOT_ENV_FIELDS`), a pinned third-party
package's (:data:`THIRD_PARTY_ENV_FIELDS`), or when the config names the package that registers
it, ``env: {type: NAME, discover_packages_path: PKG, ...}`` (lerobot-eval's spelling). The bridge
then imports ``PKG`` as lerobot-eval does, and LeRobot checks that type's fields when the env is
built (its dataclass refuses unknown ones with ``TypeError``).
"""

from __future__ import annotations

import difflib
from typing import Any

#: The env config key naming a package to import before the env config is made (as
#: ``lerobot-eval --env.discover_packages_path``); not a field of the config.
PLUGIN_KEY = "discover_packages_path"

#: LeRobot 0.6.1: every ``EnvConfig`` has these fields (``envs/configs.py``, ``EnvConfig``).
COMMON_FIELDS = ("task", "fps", "features", "features_map", "max_parallel_tasks", "disable_env_checker")

#: LeRobot 0.6.1's own env types the bridge runs -> each config's fields beyond COMMON_FIELDS.
LEROBOT_ENV_FIELDS: dict[str, tuple[str, ...]] = {
    "aloha": ("episode_length", "obs_type", "observation_height", "observation_width", "render_mode"),
    "metaworld": ("episode_length", "obs_type", "render_mode", "multitask_eval"),
    "pusht": ("episode_length", "obs_type", "render_mode", "visualization_width", "visualization_height",
              "observation_height", "observation_width"),
    "robocasa": ("episode_length", "obs_type", "render_mode", "camera_name", "observation_height",
                 "observation_width", "visualization_height", "visualization_width", "split", "obj_registries"),
    "robomme": ("episode_length", "action_space", "dataset_split", "task_ids"),
    "robotwin": ("episode_length", "obs_type", "render_mode", "camera_names", "observation_height",
                 "observation_width", "action_mode"),
    "vlabench": ("episode_length", "obs_type", "render_mode", "render_resolution", "robot", "action_mode"),
}

#: LeRobot 0.6.1's own env types the bridge refuses, and why.
REFUSED_ENV_TYPES: dict[str, str] = {
    "libero": "its env processor (LiberoProcessorStep) is not applied by the bridge: use arena's `libero` "
    "environment with the lerobot/libero adapter",
    "libero_plus": "its env processor (LiberoProcessorStep) is not applied by the bridge: use arena's `libero` "
    "environment with the lerobot/libero adapter",
    "isaaclab_arena": "its env processor (IsaaclabArenaProcessorStep) is not applied by the bridge, and its env is "
    "Hub code (make_env's trust_remote_code)",
    "gym_manipulator": "it is a real robot's env (HIL-SERL's make_robot_env, lerobot/rl/gym_manipulator.py), "
    "which make_env does not build",
}
#: The refused types whose configs carry env processors (``get_env_processors()``).
PROCESSOR_ENV_TYPES = frozenset({"libero", "libero_plus", "isaaclab_arena"})

#: Types of third-party packages pinned in the lerobot venv -> (distribution, fields beyond COMMON_FIELDS).
THIRD_PARTY_ENV_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "so101": ("lerobot_env_so101==0.4.0", ("episode_length", "image_obs", "render_mode", "reward_type",
                                           "random_block_position", "action_scale")),
}

_FEATURES = ("the policy features lerobot-eval's make_policy derives from the env config; the bridge's policy "
             "server takes the checkpoint's own")
_COMMON_IGNORED = {
    "fps": "lerobot-eval's video frame rate only (arena's is recording.fps); the env does not read it",
    "features": _FEATURES,
    "features_map": _FEATURES,
    "max_parallel_tasks": "lerobot-eval's threads over the tasks of a multi-task suite; the bridge runs one "
    "(suite, task_id) per run: run several runs instead",
}
#: Fields LeRobot accepts but that do not reach the env the bridge builds, per type -> what they
#: do instead. Verified for the types whose simulators the lerobot venv holds (the test changes
#: each field and compares what LeRobot builds the env from).
IGNORED_FIELDS: dict[str, dict[str, str]] = {
    "pusht": {
        **_COMMON_IGNORED,
        "observation_height": "only the image feature's declared shape: LeRobot does not pass it to gym-pusht, "
        "which renders 96x96 observations",
        "observation_width": "only the image feature's declared shape: LeRobot does not pass it to gym-pusht, "
        "which renders 96x96 observations",
    },
    "aloha": {
        **_COMMON_IGNORED,
        "observation_height": "only the image feature's declared shape: LeRobot does not pass it to gym-aloha, "
        "which renders 480x640 observations",
        "observation_width": "only the image feature's declared shape: LeRobot does not pass it to gym-aloha, "
        "which renders 480x640 observations",
    },
    "metaworld": {
        **_COMMON_IGNORED,
        "episode_length": "LeRobot's Meta-World env runs 500 steps an episode whatever it says (envs/metaworld.py: "
        "_max_episode_steps = 500): end episodes earlier with rollout_limit.max_episode_steps",
        "multitask_eval": "LeRobot 0.6.1 reads it nowhere",
        "disable_env_checker": "LeRobot's Meta-World builds its env without gym.make, so without gym's env checker",
    },
    "so101": dict(_COMMON_IGNORED),
}


def known_types() -> list[str]:
    """Every env type name this module knows (the runnable and the refused ones), sorted."""
    return sorted({*LEROBOT_ENV_FIELDS, *REFUSED_ENV_TYPES, *THIRD_PARTY_ENV_FIELDS})


def env_fields(kind: str) -> tuple[str, ...] | None:
    """The fields of env type ``kind``'s config, or ``None`` when this module does not know them."""
    if kind in LEROBOT_ENV_FIELDS:
        return COMMON_FIELDS + LEROBOT_ENV_FIELDS[kind]
    if kind in THIRD_PARTY_ENV_FIELDS:
        return COMMON_FIELDS + THIRD_PARTY_ENV_FIELDS[kind][1]
    return None


def check_env_config(env: dict[str, Any]) -> list[tuple[str, str]]:
    """The problems of a ``lerobot_env`` ``env`` mapping, as ``(key under env, message)``; empty
    when it is acceptable (see the module docstring for the rule)."""
    kind = env.get("type")
    plugin = env.get(PLUGIN_KEY)
    if plugin is not None and (not isinstance(plugin, str) or not plugin):
        return [(PLUGIN_KEY, "expected the name of a Python package that registers LeRobot env types")]
    if kind in REFUSED_ENV_TYPES:
        return [("type", f"the lerobot_env bridge cannot run LeRobot's {kind!r} env: {REFUSED_ENV_TYPES[kind]}")]
    fields = env_fields(kind)
    if fields is None:
        if plugin is not None:
            return []  # a third-party type: LeRobot checks it in the venv
        return [("type", _unknown_type(kind))]
    problems = []
    ignored = IGNORED_FIELDS.get(kind, {})
    for key in env:
        if key in ("type", PLUGIN_KEY):
            continue
        if key in ignored:
            problems.append((key, f"{key!r} of the {kind!r} env config never reaches the env LeRobot builds: "
                                  f"{ignored[key]}; leave it out"))
        elif key not in fields:
            usable = [f for f in fields if f not in ignored]
            close = difflib.get_close_matches(key, usable, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append((key, f"{_source(kind)} {kind!r} env config has no field {key!r}; {hint}"
                                  f"its fields: {', '.join(usable)}"))
    return problems


def _source(kind: str) -> str:
    return f"{THIRD_PARTY_ENV_FIELDS[kind][0]}'s" if kind in THIRD_PARTY_ENV_FIELDS else "LeRobot 0.6.1's"


def _unknown_type(kind: str) -> str:
    runnable = sorted(LEROBOT_ENV_FIELDS)
    third = ", ".join(f"{k} ({dist})" for k, (dist, _) in sorted(THIRD_PARTY_ENV_FIELDS.items()))
    close = difflib.get_close_matches(kind, known_types(), n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return (
        f"unknown LeRobot env type {kind!r}; {hint}LeRobot 0.6.1's: {', '.join(runnable)}; pinned third-party: "
        f"{third}. A type another package registers needs that package named: env.{PLUGIN_KEY}: PACKAGE "
        "(imported as lerobot-eval's --env.discover_packages_path imports it)"
    )
