"""Isaac Lab tasks of this plugin, registered with gymnasium when this package is imported."""

import gymnasium as gym

REACH_CUBE = "Arena-Reach-Cube-v0"

if REACH_CUBE not in gym.registry:
    gym.register(
        id=REACH_CUBE,
        entry_point="isaaclab.envs:ManagerBasedRLEnv",
        disable_env_checker=True,
        kwargs={"env_cfg_entry_point": f"{__name__}.reach_cube:ReachCubeEnvCfg"},
    )


def owns_assets(config) -> bool:
    """Whether ``config`` selects a task of this plugin whose assets it writes itself (when no
    ``asset_root`` is given): ``Arena-Reach-Cube-v0`` or its config class."""
    return config.task == REACH_CUBE or (config.env_cfg or "").startswith(f"{__name__}.")
