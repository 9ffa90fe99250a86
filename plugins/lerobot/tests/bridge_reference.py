"""Run in the ``lerobot`` venv by ``test_lerobot_env_bridge.py``: the reference side, LeRobot 0.6's
own evaluation of a checkpoint on a LeRobot env config.

    python bridge_reference.py build DIR ENV_JSON # a random ACT checkpoint for that env's observation
    python bridge_reference.py eval DIR ENV_JSON N_EPISODES BATCH SEED OUT.json [MAX_STEPS]
    python bridge_reference.py both DIR ENV_JSON N_EPISODES BATCH SEED OUT.json [MAX_STEPS]  # build, then eval
                                                                     # (one import of torch, one env build)
    python bridge_reference.py many JOBS.json  # ``both`` for each job, in this one process

``many`` reads a JSON list of jobs, each ``{"dir", "env", "episodes", "batch", "seed", "out"}``
and optionally ``"max_steps"`` (the arguments of ``both``, ``env`` a mapping), and runs them in
order: LeRobot and torch are imported once for all (a test module's references cost one
start-up). Each job's checkpoint is seeded and each evaluation seeds its envs, so a job gives
what it gives alone; a ``metaworld`` job re-seeds the global ``numpy`` generator (its
``scenes``), so list it last.

``eval`` is ``lerobot-eval``'s ``eval_main`` (``lerobot/scripts/lerobot_eval.py``, 0.6.1) without
its CLI: ``make_env(cfg, n_envs=BATCH, use_async_envs=False)``, ``make_policy(cfg, env_cfg=...,
rename_map={})``, ``make_pre_post_processors`` with the device and rename_map overrides,
``make_env_pre_post_processors``, then LeRobot's own ``eval_policy(..., start_seed=SEED)``.
The vector env's ``step`` is wrapped to log the actions it receives and what it returns, so
that OUT.json holds per episode: ``seed``, ``sum_reward``, ``max_reward``, ``success`` (from
``eval_policy``'s ``per_episode``), ``steps`` (up to the env's first terminated or truncated)
and ``actions`` (those steps' actions, float32 values as lists).

``MAX_STEPS`` shortens the rollout as lerobot-eval's ``rollout`` reads its limit
(``env.call("_max_episode_steps")[0]``, ``scripts/lerobot_eval.py`` l.263): LeRobot's
Meta-World ignores its config's ``episode_length`` and always runs 500 steps
(``envs/metaworld.py`` l.104), which no test can afford; the arena side then sets
``rollout_limit.max_episode_steps`` to the same number.

For ``metaworld``, OUT.json also holds ``scenes``: the object/goal vector (``_last_rand_vec``)
each episode seed gets at batch size 1, at batch size 2 with the seeds swapped, and again after
the global ``numpy`` generator was re-seeded (LeRobot 0.6.1 draws it from the env's own seeded
generator, not the global one: the three must be equal).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def _first_env(env_cfg, n_envs: int):
    from lerobot.envs.factory import make_env

    return next(iter(next(iter(make_env(env_cfg, n_envs=n_envs, use_async_envs=False).values())).values()))


def build(directory: str, env_json: str, vec=None) -> None:
    """A random ACT for the features the env's observation has (one reset of ``vec``, else of a
    new env, renamed as ``preprocess_observation`` renames it): its cameras,
    ``observation.state`` and ``observation.environment_state``, and its action width."""
    from lerobot.envs.factory import make_env_config
    from lerobot.utils.import_utils import register_third_party_plugins

    from arena_lerobot.bridge import lerobot_observation
    from arena_lerobot.testing import make_act_checkpoint

    register_third_party_plugins()
    own = vec is None
    if own:
        fields = json.loads(env_json)
        vec = _first_env(make_env_config(fields.pop("type"), **fields), 1)
    try:
        observation = lerobot_observation(vec.reset(seed=[0])[0])
        action_dim = int(np.prod(vec.single_action_space.shape))
    finally:
        if own:
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


def evaluate(
    directory: str, env_json: str, n_episodes: int, batch: int, seed: int, out: str, max_steps: int | None = None,
    build_first: bool = False,
) -> None:
    """LeRobot's ``eval_policy`` (see the module docstring); ``build_first``: make the
    checkpoint first from this same env (one env build)."""
    import torch
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.envs.factory import make_env_config, make_env_pre_post_processors
    from lerobot.policies.factory import make_policy, make_pre_post_processors
    from lerobot.scripts.lerobot_eval import eval_policy
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()
    fields = json.loads(env_json)
    env_cfg = make_env_config(fields.pop("type"), **fields)
    vec = _first_env(env_cfg, batch)
    if build_first:
        build(directory, env_json, vec)
    if max_steps is not None:
        vec.set_attr("_max_episode_steps", max_steps)
    policy_cfg = PreTrainedConfig.from_pretrained(directory)
    policy_cfg.pretrained_path = directory
    policy_cfg.device = "cpu"
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
    result = {"episodes": episodes, "aggregated": info["aggregated"]}
    if env_cfg.type == "metaworld":
        result["scenes"] = metaworld_scenes(vec, env_cfg, [e["seed"] for e in episodes[:2]])
    vec.close()
    with open(out, "w") as handle:
        json.dump(result, handle)


def metaworld_scenes(vec, env_cfg, seeds: list[int]) -> dict[str, list]:
    """The object/goal vector LeRobot's Meta-World gives ``seeds`` at batch size 1 (``vec``),
    at batch size 2 in the reverse order, and at batch size 1 again after the global generator
    was re-seeded and drawn from: ``{"batch1": [...], "batch2_swapped": [...], "global_reseeded": [...]}``."""

    def scene(env, index: int = 0) -> list[float]:
        return np.asarray(env.envs[index].unwrapped._env._last_rand_vec, np.float64).tolist()

    batch1 = []
    for s in seeds:
        vec.reset(seed=[s])
        batch1.append(scene(vec))
    pair = _first_env(env_cfg, 2)
    pair.reset(seed=list(reversed(seeds)))
    swapped = [scene(pair, 1), scene(pair, 0)]
    pair.close()
    np.random.seed(12345)
    np.random.uniform(size=17)
    again = []
    for s in seeds:
        vec.reset(seed=[s])
        again.append(scene(vec))
    return {"batch1": batch1, "batch2_swapped": swapped, "global_reseeded": again}


def many(jobs_path: str) -> None:
    """``both`` for each job of the JSON list at ``jobs_path`` (see the module docstring)."""
    with open(jobs_path) as handle:
        jobs = json.load(handle)
    for job in jobs:
        evaluate(job["dir"], json.dumps(job["env"]), int(job["episodes"]), int(job["batch"]), int(job["seed"]), job["out"],
                 job.get("max_steps"), build_first=True)


if __name__ == "__main__":
    if sys.argv[1] == "many":
        many(sys.argv[2])
    elif sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    else:
        limit = int(sys.argv[8]) if len(sys.argv) > 8 else None
        evaluate(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], limit,
                 build_first=sys.argv[1] == "both")
