"""``ArenaEnvBuilder``: scene + embodiment + task -> one manager-based RL env config, registered with gym."""

from __future__ import annotations

import argparse

import gymnasium as gym

from isaaclab.envs import ManagerBasedRLEnvCfg
from isaaclab.scene import InteractiveSceneCfg
from isaaclab.utils import configclass


def combine(name: str, *parts, bases: tuple = ()):
    """A config instance of a new configclass holding every field of ``parts`` (later ones win)."""
    fields: dict = {}
    for part in parts:
        if part is not None:
            fields.update({k: v for k, v in vars(part).items() if not k.startswith("_")})
    namespace = {"__annotations__": {k: type(v) for k, v in fields.items()}, **fields}
    return configclass(type(name, bases or (object,), namespace))()


class ArenaEnvBuilder:
    def __init__(self, arena_env, args: argparse.Namespace):
        self.arena_env = arena_env
        self.args = args

    def compose_manager_cfg(self) -> ManagerBasedRLEnvCfg:
        env, emb, task = self.arena_env.scene, self.arena_env.embodiment, self.arena_env.task
        scene = combine(
            "SceneCfg",
            InteractiveSceneCfg(num_envs=self.args.num_envs, env_spacing=self.args.env_spacing),
            env.get_scene_cfg(), emb.get_scene_cfg(), task.get_scene_cfg(),
            bases=(InteractiveSceneCfg,),
        )
        cfg = task.env_cfg_type()(
            scene=scene,
            observations=emb.get_observation_cfg(),
            actions=emb.get_action_cfg(),
            events=combine("EventsCfg", emb.get_events_cfg(), task.get_events_cfg()),
            terminations=task.get_termination_cfg(),
            rewards=combine("RewardsCfg"),
        )
        cfg.task_description = task.description
        if self.arena_env.env_cfg_callback is not None:
            cfg = self.arena_env.env_cfg_callback(cfg)
        return cfg

    def build_registered(self, env_cfg=None):
        name = self.arena_env.name
        cfg = env_cfg if env_cfg is not None else self.compose_manager_cfg()
        if name not in gym.registry:
            gym.register(id=name, entry_point="isaaclab.envs:ManagerBasedRLEnv", disable_env_checker=True)
        cfg.sim.device = self.args.device
        cfg.scene.num_envs = self.args.num_envs
        return name, cfg

    def make_registered(self, env_cfg=None):
        name, cfg = self.build_registered(env_cfg)
        return gym.make(name, cfg=cfg).unwrapped
