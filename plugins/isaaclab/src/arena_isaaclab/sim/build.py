"""Resolve an Isaac Lab env config from arena's options, adjust it, and build the env.

Three sources (:class:`arena_isaaclab.config.IsaacLabConfig`): a registered gym id (Isaac
Lab's ``resolve_task_config`` with the ``physics=`` / ``presets=`` selectors), a config class
(``package.module:Cfg``, presets resolved the same way) and an IsaacLab-Arena environment
(its ``EnvironmentRegistry`` factory, then ``ArenaEnvBuilder.build_registered``, which
registers a gym id and returns the composed config). Every path ends in the same
adjustments (:func:`adjust`) and ``gym.make(id, cfg=cfg)``, or ``ManagerBasedRLEnv(cfg)`` for a
config class, inside ``isaaclab.app.launch_simulation`` (kit-less for Newton).
"""

from __future__ import annotations

import argparse
import pkgutil
from dataclasses import dataclass
from typing import Any

from arena_isaaclab.config import IsaacLabConfig
from arena_isaaclab.sim.process import IsaacLabSetupError


@dataclass
class Resolved:
    """An env config ready to build: ``cfg`` and how to make it (``gym_id`` or the class itself)."""

    cfg: Any
    gym_id: str | None
    source: str


def default_device() -> str:
    """``cuda:0`` when torch sees a GPU, else ``cpu``."""
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def resolve(config: IsaacLabConfig, num_envs: int, device: str) -> Resolved:
    """The env config ``config`` names, with presets applied, for ``num_envs`` envs on ``device``.

    Raises:
        IsaacLabSetupError: an unknown gym id, a config class that does not import, or
            ``isaaclab_arena`` requested where it is not installed.
    """
    if config.task is not None:
        import gymnasium as gym

        import arena_isaaclab.sim.tasks  # noqa: F401  (registers this plugin's tasks)

        try:
            import isaaclab_tasks  # noqa: F401  (registers Isaac Lab's tasks)
        except ImportError:  # pragma: no cover - isaaclab ships isaaclab_tasks
            pass
        if config.task not in gym.registry:
            known = sorted(k for k in gym.registry if k.startswith(("Isaac-", "Arena-")))
            raise IsaacLabSetupError(
                f"unknown Isaac Lab task {config.task!r}; registered: {', '.join(known[:40])}"
                + (" ..." if len(known) > 40 else "")
            )
        from isaaclab_tasks.utils.hydra import resolve_task_config
        from isaaclab_tasks.utils.parse_cfg import load_cfg_from_registry

        names = _selected(load_cfg_from_registry(config.task, "env_cfg_entry_point"), config)
        overrides = [f"presets={','.join(names)}"] if names else []
        cfg, _ = resolve_task_config(config.task, None, overrides=overrides)
        return Resolved(cfg, config.task, config.task)
    if config.env_cfg is not None:
        try:
            target: Any = pkgutil.resolve_name(config.env_cfg)
        except (ImportError, AttributeError, ValueError) as exc:
            raise IsaacLabSetupError(f"env_cfg {config.env_cfg!r} cannot be loaded: {exc}") from exc
        cfg = target() if isinstance(target, type) else target
        from isaaclab_tasks.utils.hydra import resolve_presets

        cfg = resolve_presets(cfg, _selected(cfg, config))
        return Resolved(cfg, None, config.env_cfg)
    return _resolve_isaaclab_arena(config, num_envs, device)


def _resolve_isaaclab_arena(config: IsaacLabConfig, num_envs: int, device: str) -> Resolved:
    """Build an IsaacLab-Arena environment's config through its registry and ``ArenaEnvBuilder``."""
    arena_cfg = config.isaaclab_arena
    assert arena_cfg is not None
    try:
        from isaaclab_arena.assets.registries import EnvironmentRegistry
        from isaaclab_arena.environments.arena_env_builder import ArenaEnvBuilder
    except ImportError as exc:
        raise IsaacLabSetupError(
            "isaaclab_arena is not importable in this interpreter: IsaacLab-Arena is not on PyPI and "
            "needs Isaac Sim; install it into the worker's venv (or its Docker image) and set "
            f"environment.python to that interpreter ({exc})"
        ) from exc
    registry = EnvironmentRegistry()
    try:
        factory_type = registry.get_component_by_name(arena_cfg.environment)
    except (AssertionError, KeyError):
        known = ", ".join(sorted(registry.get_all_keys()))
        raise IsaacLabSetupError(
            f"unknown IsaacLab-Arena environment {arena_cfg.environment!r}; registered: {known}"
        ) from None
    cfg_type = registry.get_environment_cfg_type(factory_type)
    try:
        environment_cfg = cfg_type(**arena_cfg.environment_options())
    except TypeError as exc:
        raise IsaacLabSetupError(f"isaaclab_arena options for {arena_cfg.environment!r}: {exc}") from exc
    arena_env = factory_type().build(environment_cfg)
    args = argparse.Namespace(
        num_envs=num_envs,
        env_spacing=arena_cfg.env_spacing,
        device=device,
        disable_fabric=False,
        mimic=False,
        solve_relations=arena_cfg.solve_relations,
        enable_cameras=True,
    )
    gym_id, cfg = ArenaEnvBuilder(arena_env, args).build_registered()
    from isaaclab_tasks.utils.hydra import resolve_presets

    cfg = resolve_presets(cfg, _selected(cfg, config))
    return Resolved(cfg, gym_id, f"isaaclab_arena:{arena_cfg.environment}")


#: The physics preset a config without presets runs anyway (Isaac Lab 3's kit-less default).
DEFAULT_PHYSICS = "newton_mjwarp"


def _selected(cfg: Any, config: IsaacLabConfig) -> list[str]:
    """The preset names to select in ``cfg``: ``physics`` (when ``cfg`` defines that preset, or
    it is the default that a config without physics presets runs) and ``presets``.

    Raises:
        IsaacLabSetupError: ``physics`` or a name of ``presets`` is not a preset of ``cfg``.
    """
    from isaaclab_tasks.utils.hydra import collect_presets

    known = {name for fields in collect_presets(cfg).values() for name in fields if name != "default"}
    missing = [n for n in config.presets if n not in known]
    if config.physics not in known and config.physics != DEFAULT_PHYSICS:
        missing.insert(0, config.physics)
    if missing:
        raise IsaacLabSetupError(
            f"{', '.join(repr(m) for m in missing)}: not a preset of this task (its presets: "
            f"{', '.join(sorted(known)) or 'none'}); PhysX presets need Isaac Sim"
        )
    return [n for n in (config.physics, *config.presets) if n in known]


def adjust(cfg: Any, config: IsaacLabConfig, num_envs: int, device: str) -> list[str]:
    """Apply arena's options to the resolved env config, in place; return the removed camera names.

    - ``num_envs``, ``device``, ``build_seed``;
    - every observation group keeps its terms apart (``concatenate_terms = False``), so the
      observation is a dict per group in arena's layout;
    - cameras: resized (``camera_width`` / ``camera_height``), or removed together with the
      observation terms that read them (``cameras: false``).
    """
    from isaaclab.sensors import CameraCfg

    cfg.scene.num_envs = num_envs
    cfg.sim.device = device
    cfg.seed = config.build_seed
    removed: list[str] = []
    for name, value in list(vars(cfg.scene).items()):
        if not isinstance(value, CameraCfg):
            continue
        if not config.cameras:
            setattr(cfg.scene, name, None)
            removed.append(name)
            continue
        if config.camera_width is not None:
            value.width = config.camera_width
        if config.camera_height is not None:
            value.height = config.camera_height
    for group_name, group in _groups(cfg.observations):
        group.concatenate_terms = False
        for term_name, term in list(vars(group).items()):
            sensor = (getattr(term, "params", None) or {}).get("sensor_cfg") if _is_term(term) else None
            if sensor is not None and getattr(sensor, "name", None) in removed:
                setattr(group, term_name, None)
        if not any(_is_term(t) for t in vars(group).values()):
            setattr(cfg.observations, group_name, None)
    return removed


def _groups(observations: Any) -> list[tuple[str, Any]]:
    from isaaclab.managers import ObservationGroupCfg

    return [(k, v) for k, v in vars(observations).items() if isinstance(v, ObservationGroupCfg)]


def _is_term(value: Any) -> bool:
    from isaaclab.managers import ObservationTermCfg

    return isinstance(value, ObservationTermCfg)


def make(resolved: Resolved, device: str) -> tuple[Any, Any]:
    """Start the simulation runtime and build the env; return ``(env, launcher)``.

    ``launcher`` is the entered ``launch_simulation`` context; close it after the env.
    """
    from isaaclab.app import launch_simulation

    launcher = launch_simulation(resolved.cfg, {"device": device})
    launcher.__enter__()
    try:
        if resolved.gym_id is not None:
            import gymnasium as gym

            env = gym.make(resolved.gym_id, cfg=resolved.cfg).unwrapped
        else:
            from isaaclab.envs import ManagerBasedRLEnv

            env = ManagerBasedRLEnv(resolved.cfg)
    except BaseException:
        launcher.__exit__(None, None, None)
        raise
    return env, launcher
