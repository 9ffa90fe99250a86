"""Simulator side of the adapter-equivalence tests: one real simulator's raw observations, each
together with arena's observation of the same simulator state (both as codec frames, no pickle).

Run ``python equivalence_sources.py BENCHMARK OUT.frames`` with an interpreter that has the
simulator (ALOHA and LIBERO: their benchmark venvs; Meta-World: arena's own). It writes one
frame ``{"benchmark", "instruction", "steps": [{"arena": batched Arena-layout observation,
"raw": [per env: what LeRobot's env wrapper reads from the simulator]}, ...]}``:

- ``aloha``: arena's ``AlohaEnvironment`` and, beside it, plain ``gymnasium.make(
  "gym_aloha/AlohaTransferCube-v0", obs_type="pixels_agent_pos")`` (what LeRobot's
  ``make_env`` builds for ``AlohaEnv``) reset with the same seeds and stepped with the same
  actions; ``raw`` is gym-aloha's observation ``{"pixels": {"top"}, "agent_pos"}``.
- ``libero``: arena's ``LiberoEnvironment``; ``raw`` is LIBERO's own observation dict of that
  env (``robot0_eef_pos``, ``agentview_image``, ...: what ``LiberoEnv._format_raw_obs`` reads)
  and ``ee_ori_mat``, the controller's matrix it also reads.
- ``metaworld``: arena's ``MetaWorldEnvironment`` (camera ``corner2``, upright) and, beside it,
  a plain Meta-World env of the same goal variation and seed; ``raw`` is its 39-dim observation
  and its unrotated render (what ``MetaworldEnv._format_raw_obs`` reads).
"""

from __future__ import annotations

import sys

import numpy as np

from arena.testing.frames import write_frame

SEEDS = [3, 4]
STEPS = 2


def aloha() -> dict:
    import gym_aloha  # noqa: F401  (registers the envs)
    import gymnasium

    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    env = AlohaEnvironment(AlohaConfig(task="transfer_cube"), num_envs=len(SEEDS))
    raws = [gymnasium.make("gym_aloha/AlohaTransferCube-v0", obs_type="pixels_agent_pos") for _ in SEEDS]
    try:
        obs = env.reset_envs(list(range(len(SEEDS))), SEEDS)
        raw = [r.reset(seed=s)[0] for r, s in zip(raws, SEEDS)]
        steps = [{"arena": obs, "raw": raw}]
        rng = np.random.default_rng(0)
        for _ in range(STEPS):
            # float32 values (what lerobot-eval hands gym-aloha), the same on both sides
            actions = (obs["policy"]["joint_pos"] + rng.normal(0, 0.02, (len(SEEDS), 14))).astype(np.float32)
            obs = env.step(actions.astype(np.float64))[0]
            raw = [r.step(a)[0] for r, a in zip(raws, actions.astype(np.float64))]
            steps.append({"arena": obs, "raw": raw})
        return {"instruction": env.config.task_instruction(), "steps": steps}
    finally:
        env.close()
        for r in raws:
            r.close()


def libero() -> dict:
    from arena_libero.env import LiberoConfig, LiberoEnvironment

    env = LiberoEnvironment(LiberoConfig(suite="libero_spatial", task=0, image_size=128), num_envs=1)
    try:
        def raw_of(e: int) -> dict:
            o = env._obs[e]  # LIBERO's own observation of env e (the env keeps it)
            keys = ("agentview_image", "robot0_eye_in_hand_image", "robot0_eef_pos", "robot0_eef_quat",
                    "robot0_gripper_qpos", "robot0_gripper_qvel", "robot0_joint_pos", "robot0_joint_vel")
            raw = {k: np.asarray(o[k]) for k in keys}
            raw["ee_ori_mat"] = np.asarray(env._sims[e].env.robots[0].controller.ee_ori_mat)
            return raw

        obs = env.reset_envs([0], SEEDS[:1])
        steps = [{"arena": obs, "raw": [raw_of(0)]}]
        rng = np.random.default_rng(0)
        for _ in range(STEPS):
            obs = env.step(rng.uniform(-0.5, 0.5, (1, 7)).astype(np.float32).astype(np.float64))[0]
            steps.append({"arena": obs, "raw": [raw_of(0)]})
        return {"instruction": env.task_description, "steps": steps}
    finally:
        env.close()


def metaworld() -> dict:
    import metaworld as mw

    from arena.envs.metaworld import GOAL_SET_SEED, MetaWorldConfig, MetaWorldEnvironment

    task, size = "push-v3", 96
    env = MetaWorldEnvironment(MetaWorldConfig(task=task, camera="corner2", image_size=size, cameras=True),
                               num_envs=len(SEEDS))
    goals = mw.MT1(task, seed=GOAL_SET_SEED).train_tasks
    raws = []
    for seed in SEEDS:  # the same goal variation and seed as arena's reset (arena/envs/metaworld.py)
        r = mw.env_dict.ALL_V3_ENVIRONMENTS[task](render_mode="rgb_array", camera_name="corner2", width=size, height=size)
        r.max_path_length = 2**62
        r.set_task(goals[int(np.random.default_rng(seed).integers(len(goals)))])
        r.seed(seed)
        raws.append(r)
    try:
        obs = env.reset_envs(list(range(len(SEEDS))), SEEDS)
        states = [r.reset(seed=s)[0] for r, s in zip(raws, SEEDS)]
        steps = [{"arena": obs, "raw": [{"obs": s, "render": r.render()} for s, r in zip(states, raws)]}]
        rng = np.random.default_rng(0)
        for _ in range(STEPS):
            actions = rng.uniform(-1, 1, (len(SEEDS), 4)).astype(np.float32)
            obs = env.step(actions)[0]
            states = [r.step(a)[0] for r, a in zip(raws, actions)]
            steps.append({"arena": obs, "raw": [{"obs": s, "render": r.render()} for s, r in zip(states, raws)]})
        return {"instruction": env.task_description, "steps": steps}
    finally:
        env.close()
        for r in raws:
            r.close()


if __name__ == "__main__":
    benchmark, out = sys.argv[1], sys.argv[2]
    result = {"aloha": aloha, "libero": libero, "metaworld": metaworld}[benchmark]()
    with open(out, "wb") as f:
        write_frame(f, {"benchmark": benchmark, **result})
