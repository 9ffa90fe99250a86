"""Checks that need gym-pusht, run by the tests under the PushT venv's interpreter.

``python pusht_checks.py CHECK [ARGS...]`` prints one JSON object on its last line (the tests
assert on it); the test suite's own interpreter has no gym-pusht.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
warnings.filterwarnings("ignore", category=UserWarning, module="pygame")

OBS_TYPES = ("pixels", "pixels_agent_pos", "state", "environment_state_agent_pos")
GOAL = np.array([256.0, 256.0, np.pi / 4])


def _ours(obs_type: str, num_envs: int = 1):
    from arena_lerobot.pusht.config import PushTConfig
    from arena_lerobot.pusht.env import PushTEnvironment

    return PushTEnvironment(PushTConfig(obs_type=obs_type), num_envs=num_envs)


def _theirs(obs_type: str):
    """gym-pusht exactly as lerobot-eval builds it (``gym.make`` with its wrappers)."""
    import gym_pusht  # noqa: F401  (registers the env)
    import gymnasium as gym

    return gym.make("gym_pusht/PushT-v0", obs_type=obs_type, render_mode="rgb_array")


def _as_arena(obs_type: str, raw) -> dict:
    """What the Arena layout must hold for gym-pusht's observation ``raw`` (module docstring of
    :mod:`arena_lerobot.pusht.env`)."""
    if obs_type == "pixels":
        return {"camera_obs.pixels": raw}
    if obs_type == "pixels_agent_pos":
        return {"camera_obs.pixels": raw["pixels"], "policy.agent_pos": raw["agent_pos"]}
    if obs_type == "state":
        return {"policy.state": raw}
    return {"policy.agent_pos": raw["agent_pos"], "policy.environment_state": raw["environment_state"]}


def _flat(obs: dict, env: int = 0) -> dict:
    return {f"{group}.{k}": v[env] for group in ("camera_obs", "policy") for k, v in obs.get(group, {}).items()}


def parity(steps: int = 40) -> dict:
    """Each obs type, seeds 3 and 11: the ``pusht`` env against gym-pusht's own env, same seed,
    same float64 actions (random targets near the disc, so the block gets pushed):
    observations, rewards, coverage, success and termination, value for value."""
    out = {}
    for obs_type in OBS_TYPES:
        ours, theirs = _ours(obs_type), _theirs(obs_type)
        worst, same_keys, rewards_equal, pushed = 0.0, True, True, False
        for seed in (3, 11):
            obs = ours.reset_envs([0], [seed])
            ref, _ = theirs.reset(seed=seed)
            rng = np.random.default_rng(seed)
            for t in range(steps + 1):
                mine, expected = _flat(obs), _as_arena(obs_type, ref)
                same_keys &= sorted(mine) == sorted(expected)
                for key, value in expected.items():
                    worst = max(worst, float(np.abs(np.asarray(mine[key], np.float64) - np.asarray(value, np.float64)).max()))
                if t == steps:
                    break
                block = obs["privileged"]["block_pose"][0]
                action = block[:2] + rng.normal(0.0, 40.0, 2)
                obs, reward, terminated, _, info = ours.step(action[None])
                ref, ref_reward, ref_terminated, _, ref_info = theirs.step(action)
                rewards_equal &= (
                    float(reward[0]) == float(ref_reward)
                    and float(info["coverage"][0]) == float(ref_info["coverage"])
                    and bool(info["is_success"][0]) == bool(ref_info["is_success"]) == bool(terminated[0]) == bool(ref_terminated)
                )
                pushed |= float(ref_info["coverage"]) > 0 or int(ref_info["n_contacts"]) > 0
        out[obs_type] = {"max_abs_diff": worst, "same_keys": same_keys, "rewards_equal": rewards_equal, "pushed": pushed}
        ours.close()
        theirs.close()
    return out


def shapes() -> dict:
    """Keys, shapes and dtypes of each obs type's batched observation (two envs), the privileged
    part, the video frame, and ``info``'s per-env arrays."""
    out = {}
    for obs_type in OBS_TYPES:
        env = _ours(obs_type, num_envs=2)
        obs = env.reset_envs([0, 1], [5, 6])
        _, reward, terminated, truncated, info = env.step(np.full((2, 2), 256.0))
        described = {
            group: {k: [list(v.shape), str(v.dtype)] for k, v in obs[group].items()}
            for group in ("camera_obs", "policy", "privileged") if group in obs
        }
        described["task"] = obs["task"]
        described["keys"] = sorted(obs)
        described["info"] = {k: [list(np.shape(v)), str(np.asarray(v).dtype)] for k, v in info.items()}
        described["step"] = [str(reward.dtype), str(terminated.dtype), str(truncated.dtype)]
        frame = env.render(1)
        described["render"] = [list(frame.shape), str(frame.dtype)]
        described["action_space"] = [env.action_space.low.tolist(), env.action_space.high.tolist(), str(env.action_space.dtype)]
        out[obs_type] = described
        env.close()
    return out


def success() -> dict:
    """gym-pusht's success, both ways: an episode reset (gym-pusht's ``reset_to_state``) so that
    the block covers the target, and one a few units off it, each stepped once holding the disc
    still far from the block; the same states in gym-pusht itself."""
    # reset_to_state sets the block's position, then its angle, turning it about its centre of
    # gravity (0, 45): the position to give for the block to end exactly on the goal pose.
    turn = np.array([[np.cos(GOAL[2]), -np.sin(GOAL[2])], [np.sin(GOAL[2]), np.cos(GOAL[2])]])
    cog = np.array([0.0, 45.0])
    origin = GOAL[:2] - cog + turn @ cog
    agent = np.array([80.0, 80.0])
    out = {}
    for name, shift in (("on_goal", 0.0), ("near_goal", 1.0), ("off_goal", 4.0)):
        state = np.array([*agent, origin[0] + shift, origin[1], GOAL[2]])
        env = _ours("state")
        obs = env.reset_to_state(0, state)
        _, reward, terminated, _, info = env.step(agent[None])
        theirs = _theirs("state")
        theirs.reset(options={"reset_to_state": state})
        _, ref_reward, ref_terminated, _, ref_info = theirs.step(agent)
        out[name] = {
            "block_pose": obs["privileged"]["block_pose"][0].round(6).tolist(),
            "coverage": float(info["coverage"][0]),
            "success": bool(info["success"][0]),
            "is_success": bool(info["is_success"][0]),
            "terminated": bool(terminated[0]),
            "reward": float(reward[0]),
            "gym_pusht": [float(ref_info["coverage"]), bool(ref_info["is_success"]), bool(ref_terminated), float(ref_reward)],
        }
        env.close()
        theirs.close()
    return out


def initial_states(*seeds: str) -> dict:
    """The initial state (agent x, y, block x, y, angle) of each seed, on env 1 of 2 after
    other episodes ran on it (reproducibility across processes and envs)."""
    env = _ours("state", num_envs=2)
    env.reset_envs([1], [999])
    for _ in range(5):
        env.step(np.full((2, 2), 100.0))
    out = {}
    for seed in seeds:
        env.reset_envs([1], [int(seed)])
        out[seed] = env.episode_info(1)["initial_state"]
    env.close()
    return out


def stay(steps: int = 5) -> dict:
    """How far the disc moves (pixels) in ``steps`` steps of seed 0, holding the env's stay action
    taken at reset, and holding a zero target."""
    out = {}
    for name in ("stay", "zeros"):
        env = _ours("pixels_agent_pos")
        obs = env.reset_envs([0], [0])
        start = obs["privileged"]["agent_pos"][0].copy()
        action = env.stay_action(obs, 0) if name == "stay" else np.zeros(2)
        for _ in range(int(steps)):
            obs = env.step(np.asarray(action, np.float64)[None])[0]
        out[name] = float(np.linalg.norm(obs["privileged"]["agent_pos"][0] - start))
        env.close()
    return out


def timing(steps: int = 200) -> dict:
    """Milliseconds per step of one env, per obs type (random targets)."""
    out = {}
    for obs_type in OBS_TYPES:
        env = _ours(obs_type)
        rng = np.random.default_rng(0)
        actions = rng.uniform(50, 450, (steps, 1, 2))
        start = time.perf_counter()
        for a in actions:
            env.step(a)
        out[obs_type] = round((time.perf_counter() - start) / steps * 1000, 3)
        env.close()
    return out


if __name__ == "__main__":
    name, *args = sys.argv[1:]
    print(json.dumps(globals()[name](*args)))
