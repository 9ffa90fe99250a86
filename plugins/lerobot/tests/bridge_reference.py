"""Run in the ``lerobot`` venv by ``test_lerobot_env_bridge.py``: the reference side, LeRobot 0.6's
own evaluation of a checkpoint on a LeRobot env config.

    python bridge_reference.py build DIR ENV_JSON # a random ACT checkpoint for that env's observation
    python bridge_reference.py eval DIR ENV_JSON N_EPISODES BATCH SEED OUT.json
    python bridge_reference.py both DIR ENV_JSON N_EPISODES BATCH SEED OUT.json   # build, then eval (one import of torch)

``eval`` is ``lerobot-eval``'s ``eval_main`` (``lerobot/scripts/lerobot_eval.py``, 0.6.1) without
its CLI: ``make_env(cfg, n_envs=BATCH, use_async_envs=False)``, ``make_policy(cfg, env_cfg=...,
rename_map={})``, ``make_pre_post_processors`` with the device and rename_map overrides,
``make_env_pre_post_processors``, then LeRobot's own ``eval_policy(..., start_seed=SEED)``.
The vector env's ``step`` is wrapped to log the actions it receives and what it returns, so
that OUT.json holds per episode: ``seed``, ``sum_reward``, ``max_reward``, ``success`` (from
``eval_policy``'s ``per_episode``), ``steps`` (up to the env's first terminated or truncated)
and ``actions`` (those steps' actions, float32 values as lists).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def build(directory: str, env_json: str) -> None:
    """A random ACT for the features the env's observation has (one reset, renamed as
    ``preprocess_observation`` renames it): its cameras, ``observation.state`` and
    ``observation.environment_state``, and its action width."""
    from lerobot.envs.factory import make_env, make_env_config
    from lerobot.utils.import_utils import register_third_party_plugins

    from arena_lerobot.bridge import lerobot_observation
    from arena_lerobot.testing import make_act_checkpoint

    register_third_party_plugins()
    fields = json.loads(env_json)
    vec = next(iter(next(iter(make_env(make_env_config(fields.pop("type"), **fields), n_envs=1).values())).values()))
    try:
        observation = lerobot_observation(vec.reset(seed=[0])[0])
        action_dim = int(np.prod(vec.single_action_space.shape))
    finally:
        vec.close()
    cameras = {k: tuple(v.shape[:2]) for k, v in observation["camera_obs"].items()}
    policy = observation["policy"]
    extra = set(policy) - {"observation.state", "observation.environment_state"}
    assert not extra, f"ACT takes no {sorted(extra)}"
    env_state = policy.get("observation.environment_state")
    make_act_checkpoint(
        directory, cameras=cameras, state_dim=int(policy["observation.state"].shape[0]), action_dim=action_dim,
        environment_state_dim=None if env_state is None else int(env_state.shape[0]), chunk_size=10,
        n_action_steps=5, dim_model=64, n_heads=2, dim_feedforward=128, n_encoder_layers=1, n_decoder_layers=1,
        use_vae=False,
    )


def evaluate(directory: str, env_json: str, n_episodes: int, batch: int, seed: int, out: str) -> None:
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.envs.factory import make_env, make_env_config, make_env_pre_post_processors
    from lerobot.policies.factory import make_policy, make_pre_post_processors
    from lerobot.scripts.lerobot_eval import eval_policy
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()
    fields = json.loads(env_json)
    env_cfg = make_env_config(fields.pop("type"), **fields)
    policy_cfg = PreTrainedConfig.from_pretrained(directory)
    policy_cfg.pretrained_path = directory
    policy_cfg.device = "cpu"
    envs = make_env(env_cfg, n_envs=batch, use_async_envs=False)
    vec = next(iter(next(iter(envs.values())).values()))
    log: list[tuple[np.ndarray, np.ndarray]] = []
    step = vec.step

    def logged(action):
        result = step(action)
        log.append((np.array(action, copy=True), np.asarray(result[2]) | np.asarray(result[3])))
        return result

    vec.step = logged
    policy = make_policy(cfg=policy_cfg, env_cfg=env_cfg, rename_map={})
    policy.eval()
    pre, post = make_pre_post_processors(
        policy_cfg=policy_cfg, pretrained_path=directory,
        preprocessor_overrides={"device_processor": {"device": "cpu"}, "rename_observations_processor": {"rename_map": {}}},
    )
    env_pre, env_post = make_env_pre_post_processors(env_cfg=env_cfg, policy_cfg=policy_cfg)
    with torch.no_grad():
        info = eval_policy(vec, policy, env_pre, env_post, pre, post, n_episodes=n_episodes, start_seed=seed)
    # split the log into rollouts (each rollout starts with a reset of all envs: lengths from its done flags)
    episodes, position = [], 0
    per_episode = info["per_episode"]
    for first in range(0, n_episodes, batch):
        ends = [None] * batch
        t = 0
        while True:
            actions, done = log[position + t]
            for b in range(batch):
                if ends[b] is None and done[b]:
                    ends[b] = t + 1
            t += 1
            if all(e is not None for e in ends) or t == vec.call("_max_episode_steps")[0]:
                break
        rollout = log[position : position + t]
        position += t
        for b in range(batch):
            index = first + b
            if index >= n_episodes:
                break
            steps = ends[b] if ends[b] is not None else t
            item = per_episode[index]
            episodes.append({
                "seed": item["seed"], "sum_reward": item["sum_reward"], "max_reward": item["max_reward"],
                "success": bool(item["success"]), "steps": steps,
                "actions": [rollout[k][0][b].astype(np.float32).tolist() for k in range(steps)],
            })
    with open(out, "w") as handle:
        json.dump({"episodes": episodes, "aggregated": info["aggregated"]}, handle)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    else:
        if sys.argv[1] == "both":
            build(sys.argv[2], sys.argv[3])
        evaluate(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
