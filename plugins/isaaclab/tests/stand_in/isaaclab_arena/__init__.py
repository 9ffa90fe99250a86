"""A small stand-in for IsaacLab-Arena (isaac-sim/IsaacLab-Arena), for tests where the real one
cannot be installed (it is not on PyPI and needs Isaac Sim).

It keeps the interface arena's ``isaaclab`` environment uses, with IsaacLab-Arena's module
paths: ``assets.registries.EnvironmentRegistry`` (``get_component_by_name``,
``get_all_keys``, ``get_environment_cfg_type``), ``assets.register.register_environment``,
``environments.arena_environment_factory`` (``ArenaEnvironmentCfg``,
``ArenaEnvironmentFactory[Cfg].build(cfg) -> IsaacLabArenaEnvironment``),
``environments.isaaclab_arena_environment.IsaacLabArenaEnvironment(name, scene, embodiment,
task)`` and ``environments.arena_env_builder.ArenaEnvBuilder(arena_env, args)``
(``compose_manager_cfg``, ``build_registered() -> (gym id, env cfg)``). Its one environment,
``droid_cube_stand_in``, has IsaacLab-Arena's DROID observation layout (``policy``:
``actions``, ``robot_joint_pos``, ``joint_pos`` (7), ``gripper_pos`` (1), ``eef_pos``,
``eef_quat``; ``camera_obs``: ``external_camera_rgb``, ``external_camera_2_rgb``,
``wrist_camera_rgb``) and its 8-value joint-position action, on a small 7+1-joint arm authored
offline (``arena_isaaclab.sim.assets.DROID_ARM``) at a small image size.
"""
