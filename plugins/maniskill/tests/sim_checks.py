"""Checks that need ManiSkill3, run by the tests under the ``maniskill`` venv's interpreter.

``python sim_checks.py CHECK [ARGS...]`` prints one JSON object as its last line (the tests
assert on it); the suite's own interpreter has no ManiSkill (its numpy is >= 2).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def layout() -> dict:
    """The env's observation, info and seeding against ManiSkill's own env of the same task."""
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401
    import torch

    from arena_maniskill.config import ManiSkillConfig
    from arena_maniskill.env import ManiSkillEnvironment

    env = ManiSkillEnvironment(ManiSkillConfig(task="PickCube-v1", obs_mode="rgb+state"), num_envs=2)
    obs = env.reset_envs([0, 1], [7, 8])
    out: dict = {
        "keys": sorted(obs),
        "camera": {k: [list(v.shape), str(v.dtype)] for k, v in obs["camera_obs"].items()},
        "policy": {k: [list(v.shape), str(v.dtype)] for k, v in obs["policy"].items()},
        "task": obs["task"],
        "action_space": [list(env.action_space.shape), str(env.action_space.dtype)],
        "max_steps": env.default_max_episode_steps,
        "frame_std": float(obs["camera_obs"]["base_camera_rgb"].std()),
    }
    # ManiSkill's own env, same seed: its obs_mode="state" vector and its rgb frame.
    theirs = gym.make("PickCube-v1", obs_mode="state", control_mode="pd_joint_pos").unwrapped
    state, _ = theirs.reset(seed=8)
    out["state_max_abs_diff"] = float(np.abs(obs["policy"]["state"][1] - state[0].numpy()).max())
    camera = gym.make(
        "PickCube-v1", obs_mode="rgb", control_mode="pd_joint_pos", render_backend="cpu",
        sensor_configs={"width": 128, "height": 128},
    ).unwrapped
    frame, _ = camera.reset(seed=8)
    out["frame_equal"] = bool(np.array_equal(obs["camera_obs"]["base_camera_rgb"][1], frame["sensor_data"]["base_camera"]["rgb"][0].numpy()))
    # Stepped with the same actions, both stay equal.
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(5):
        action = rng.uniform(env.action_space.low, env.action_space.high, size=(2, 8)).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        state, their_reward, *_ = theirs.step(torch.from_numpy(action[1:2]))
        worst = max(worst, float(np.abs(obs["policy"]["state"][1] - state[0].numpy()).max()))
        worst = max(worst, abs(float(reward[1]) - float(their_reward[0])))
    out["stepped_max_abs_diff"] = worst
    out["info"] = {k: [list(np.asarray(v).shape), str(np.asarray(v).dtype)] for k, v in info.items()}
    out["step_types"] = [str(reward.dtype), str(terminated.dtype), str(truncated.dtype)]
    out["render"] = [list(env.render(1).shape), str(env.render(1).dtype)]
    # Env 0 restarted with seed 8 is env 1's episode of seed 8, whatever env 0 did before.
    again = env.reset_envs([0], [8])
    out["reset_same_scene"] = bool(np.array_equal(again["policy"]["state"][0], ManiSkillEnvironment_state(seed=8)))
    out["episode_info"] = env.episode_info(0)
    env.close()
    # State only (no camera in the observation, videos still rendered): the conformance test.
    return out


def ManiSkillEnvironment_state(seed: int) -> np.ndarray:  # noqa: N802 - reads as what it returns
    """ManiSkill's own initial state vector of PickCube-v1 for ``seed``."""
    import gymnasium as gym

    theirs = gym.make("PickCube-v1", obs_mode="state", control_mode="pd_joint_pos").unwrapped
    state, _ = theirs.reset(seed=seed)
    return state[0].numpy()


def catalog() -> dict:
    """Each offline task of the catalog against ManiSkill's registry: its step limit, its assets
    shipped, its metrics among its ``info`` keys, one step, state only."""
    import gymnasium as gym
    import mani_skill.envs  # noqa: F401
    from mani_skill.utils.assets.data import DATA_SOURCES
    from mani_skill.utils.registration import REGISTERED_ENVS

    from arena_maniskill.catalog import TASKS

    out: dict = {"steps": {}, "asset_ids": {}, "info_keys": {}}
    for gym_id, spec in TASKS.items():
        registered = REGISTERED_ENVS.get(gym_id)
        out["steps"][gym_id] = [spec.max_episode_steps, registered.max_episode_steps if registered else None]
        out["asset_ids"][gym_id] = [a in DATA_SOURCES for a in spec.assets]
        if registered is not None:
            out["asset_ids"][gym_id].append(sorted(spec.assets) == sorted(registered.asset_download_ids or []) or gym_id)
        if spec.offline:
            env = gym.make(gym_id, obs_mode="state").unwrapped
            env.reset(seed=0)
            *_, info = env.step(env.action_space.sample() * 0)
            out["info_keys"][gym_id] = [sorted(info), sorted(spec.metrics)]
            env.close()
    return out


def assets(asset_dir: str) -> dict:
    """A task needing downloaded assets, built with an empty ``asset_dir``: the error."""
    from arena_maniskill.config import ManiSkillConfig
    from arena_maniskill.env import ManiSkillEnvironment

    try:
        ManiSkillEnvironment(ManiSkillConfig(task="PutCarrotOnPlateInScene-v1", asset_dir=asset_dir), num_envs=1)
    except FileNotFoundError as exc:
        import mani_skill

        return {"error": str(exc), "asset_dir": str(mani_skill.ASSET_DIR)}
    return {"error": None}


def batched() -> dict:
    """The ``physx_cuda`` bookkeeping (one ManiSkill env of N scenes) on a CPU: ``gym.make``
    returns a stand-in with ManiSkill's batched interface (torch tensors of N rows, ``reset(seed=
    list, options={"env_idx": ...})``), which records what the environment hands it."""
    import gymnasium as gym
    import torch

    from arena_maniskill.config import ManiSkillConfig
    from arena_maniskill.env import ManiSkillEnvironment

    class Batched:
        """N scenes; the observation of scene i is its episode seed, its reward the action's sum."""

        def __init__(self, num_envs: int, **kwargs) -> None:
            self.num_envs, self.kwargs, self.calls = num_envs, kwargs, []
            self.device = torch.device("cpu")
            self.single_action_space = gym.spaces.Box(-1.0, 1.0, (8,), np.float32)
            self.seeds = torch.zeros(num_envs)
            self.elapsed_steps = torch.zeros(num_envs, dtype=torch.int32)

        @property
        def unwrapped(self):
            return self

        def _obs(self):
            n = self.num_envs
            return {"agent": {"qpos": self.seeds[:, None].repeat(1, 9)},
                    "extra": {"tcp_pose": torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 7)},
                    "sensor_data": {"base_camera": {"rgb": (self.seeds[:, None, None, None] % 256).to(torch.uint8).repeat(1, 4, 4, 3)}}}

        def reset(self, seed=None, options=None):
            options = options or {}
            self.calls.append({"seed": seed, "env_idx": options.get("env_idx", torch.arange(self.num_envs)).tolist()})
            for i in self.calls[-1]["env_idx"]:
                self.seeds[i] = seed[i] if isinstance(seed, list) else seed
                self.elapsed_steps[i] = 0
            return self._obs(), {}

        def step(self, action):
            self.elapsed_steps += 1
            reward = action.sum(dim=1)
            info = {"success": action[:, 0] > 0, "elapsed_steps": self.elapsed_steps.clone(), "shared": torch.tensor(1.0)}
            return self._obs(), reward, action[:, 0] > 0, torch.zeros(self.num_envs, dtype=torch.bool), info

        def close(self):
            self.calls.append("closed")

    made = []

    def make(task, num_envs=1, **kwargs):
        made.append(Batched(num_envs, task=task, **kwargs))
        return made[-1]

    gym.make = make
    env = ManiSkillEnvironment(ManiSkillConfig(task="PickCube-v1", sim_backend="physx_cuda"), num_envs=4)
    obs = env.reset_envs([3, 1], [13, 11])
    actions = np.zeros((4, 8), np.float32)
    actions[:, 0] = [0.5, -0.5, 0.25, -0.25]
    actions[:, 1] = [1, 2, 3, 4]
    stepped, reward, terminated, truncated, info = env.step(actions)
    out = {
        "made": [{"num_envs": m.num_envs, "sim_backend": m.kwargs["sim_backend"]} for m in made],
        "calls": made[0].calls,
        "qpos": obs["policy"]["qpos"][:, 0].tolist(),
        "camera": [list(obs["camera_obs"]["base_camera_rgb"].shape), obs["camera_obs"]["base_camera_rgb"][:, 0, 0, 0].tolist()],
        "reward": reward.tolist(), "terminated": terminated.tolist(), "truncated": truncated.tolist(),
        "info": sorted(info), "success": info["success"].tolist(),
        "seed_of_3": env.episode_seed(3), "elapsed_of_2": env.elapsed_steps(2),
        "render": env.render(3)[0, 0].tolist(), "same_env": env.maniskill_env(0) is env.maniskill_env(3),
    }
    env.close()
    out["closed"] = made[0].calls[-1]
    return out


def history() -> dict:
    """Episode seed 5 of PickCube-v1 (random actions) as an env's first episode and after another
    episode on the same env: with fresh scenes (the default) the states are equal bit for bit;
    with ``fresh_scene: false`` (ManiSkill's plain reset) how far apart they end."""
    from arena_maniskill.config import ManiSkillConfig
    from arena_maniskill.env import ManiSkillEnvironment

    actions = np.random.default_rng(1).uniform(-0.3, 0.3, size=(12, 1, 8)).astype(np.float32)

    def states(fresh: bool, before: bool) -> np.ndarray:
        env = ManiSkillEnvironment(ManiSkillConfig(task="PickCube-v1", obs_mode="state", fresh_scene=fresh), num_envs=1)
        if before:  # another episode first: seed 3, stepped
            env.reset_envs([0], [3])
            for a in actions:
                env.step(a)
        out = [env.reset_envs([0], [5])["policy"]["state"][0]]
        for a in actions:
            out.append(env.step(a)[0]["policy"]["state"][0])
        env.close()
        return np.stack(out)

    fresh = float(np.abs(states(True, False) - states(True, True)).max())
    plain = float(np.abs(states(False, False) - states(False, True)).max())
    return {"fresh_max_abs_diff": fresh, "plain_max_abs_diff": plain}


if __name__ == "__main__":
    check, *args = sys.argv[1:]
    result = {"layout": layout, "catalog": catalog, "assets": assets, "batched": batched, "history": history}[check](*args)
    print(json.dumps(result, default=str))
