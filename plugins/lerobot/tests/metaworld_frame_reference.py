"""Run in the ``lerobot`` venv by ``test_lerobot_eval_exact.py``: one frame of LeRobot 0.6's own
Meta-World env (``lerobot/envs/metaworld.py``, Meta-World 3.0.0 and the MuJoCo of that venv),
the physical state it shows, and arena's ``metaworld`` frame of that state with
``camera_pose: lerobot`` rendered in the same process (same Meta-World, same MuJoCo).

    python metaworld_frame_reference.py TASK SEED STEPS OUT.npz     # arena importable (PYTHONPATH)

``MetaworldEnv(task="metaworld-" + TASK)`` (as ``make_env`` makes it: ``obs_type="pixels_agent_pos"``, camera ``corner2`` moved to
LeRobot's pose, 480 x 480, ``pixels_agent_pos``), ``reset(seed=SEED)``, then STEPS steps of a
fixed action sequence so the arm and gripper are away from their start. OUT.npz holds
``pixels`` (uint8 (480, 480, 3): the observation's image, flipped as LeRobot flips it),
``arena_pixels`` (arena's frame, same shape), the state (:data:`STATE`: float64 arrays of
MuJoCo's data, with the sites Meta-World places by hand, e.g. reach's goal) and ``cam_pos``,
``cam_quat``, ``cam_fovy`` of LeRobot's ``corner2``, ``episodes``: :func:`same_episodes`, and
``make_env_*``: :func:`make_env_episodes` of seeds SEED and SEED + 1 (LeRobot's env as
``lerobot-eval`` makes it, to compare with arena's ``metaworld`` run from arena's interpreter).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

#: MuJoCo data fields that fix what a Meta-World frame shows.
STATE = ("qpos", "qvel", "mocap_pos", "mocap_quat", "site_xpos", "site_xmat")


def show_state(env: Any, state: Mapping[str, np.ndarray]) -> None:
    """Put a Meta-World env (``SawyerXYZEnv``) into ``state``: mocap and joints, forward
    kinematics (``set_state``), then the hand-placed sites, as Meta-World's ``step`` leaves them."""
    data = env.data
    data.mocap_pos[:] = state["mocap_pos"]
    data.mocap_quat[:] = state["mocap_quat"]
    env.set_state(np.asarray(state["qpos"]), np.asarray(state["qvel"]))
    data.site_xpos[:] = state["site_xpos"]
    data.site_xmat[:] = state["site_xmat"]


def arena_frame(task: str, state: Mapping[str, np.ndarray], **options: Any) -> np.ndarray:
    """arena's ``metaworld`` frame (480 x 480, upright) of ``state`` with config ``options``."""
    from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment

    env = MetaWorldEnvironment(MetaWorldConfig(task=task, image_size=480, **options), num_envs=1)
    try:
        show_state(env._envs[0], state)
        return env.render(0)
    finally:
        env.close()


def _action(t: int) -> np.ndarray:
    return np.array([np.sin(t), np.cos(t), -0.5, 1.0 if t % 2 else -1.0], np.float32)


def same_episodes(task: str, seeds: list[int], steps: int) -> np.ndarray:
    """LeRobot's env, one per seed, against arena's ``metaworld`` with ``camera: corner2,
    camera_pose: lerobot, scenes: lerobot, image_size: 480, cameras: true``, one env per seed
    of one batch (seeds in reverse order), both stepped with the same float32 actions: per seed,
    whether the reset frame and state (``agent_pos`` = arena's ``state[:4]``) and every step's
    frame, state, reward and success are equal, as ``bool (len(seeds),)``."""
    from arena.envs.metaworld import MetaWorldConfig, MetaWorldEnvironment
    from lerobot.envs.metaworld import MetaworldEnv

    config = MetaWorldConfig(task=task, camera="corner2", camera_pose="lerobot", scenes="lerobot", image_size=480,
                             cameras=True)
    arena = MetaWorldEnvironment(config, num_envs=len(seeds))
    slots = list(reversed(range(len(seeds))))  # seed i in slot slots[i]
    ours = arena.reset_envs(slots, seeds)
    equal = np.ones(len(seeds), bool)
    refs = [MetaworldEnv(task=f"metaworld-{task}", obs_type="pixels_agent_pos") for _ in seeds]
    for ref in refs:  # arena's envs start with an episode of seed 0 (SerialEnvironment._start_episodes):
        ref.reset(seed=0)  # Meta-World's reset reads the object's height left by the previous one
    theirs = [ref.reset(seed=seed)[0] for ref, seed in zip(refs, seeds)]
    for t in range(steps + 1):
        for i, slot in enumerate(slots):
            equal[i] &= np.array_equal(ours["camera_obs"]["corner2"][slot], theirs[i]["pixels"])
            equal[i] &= np.array_equal(ours["policy"]["state"][slot][:4], theirs[i]["agent_pos"])
        if t == steps:
            break
        actions = np.stack([_action(t + slot) for slot in range(len(seeds))])
        ours, reward, _, _, info = arena.step(actions)
        stepped = [ref.step(actions[slot]) for ref, slot in zip(refs, slots)]
        theirs = [s[0] for s in stepped]
        for i, slot in enumerate(slots):
            equal[i] &= float(reward[slot]) == float(stepped[i][1])
            equal[i] &= bool(info["success"][slot]) == bool(stepped[i][4]["is_success"])
    arena.close()
    for ref in refs:
        ref.close()
    return equal


#: Steps of :func:`make_env_episodes` after the reset (its frames, states and rewards are recorded).
MAKE_ENV_STEPS = 2


def make_env_episodes(task: str, seeds: list[int]) -> dict[str, np.ndarray]:
    """LeRobot's own Meta-World env as ``lerobot-eval`` 0.6.1 builds and resets it
    (``make_env_config("metaworld", task=...)``, ``make_env(cfg, n_envs=1, use_async_envs=False)``,
    ``reset(seed=[s], options={NEW_ROLLOUT_OPTION: True})``), one env per seed, each reset once and
    stepped :data:`MAKE_ENV_STEPS` times with ``float32`` :func:`_action` rows. Returns
    ``make_env_pixels`` uint8 (seeds, 1 + steps, 480, 480, 3), ``make_env_agent_pos`` float64
    (seeds, 1 + steps, 4), ``make_env_obs`` float64 (seeds, 1 + steps, 39) (Meta-World's own
    observation, which arena's ``policy/state`` is), ``make_env_rewards`` float64 (seeds, steps)
    and ``make_env_mujoco``, the MuJoCo version that ran."""
    import mujoco
    from lerobot.envs.factory import make_env, make_env_config
    from lerobot.envs.utils import NEW_ROLLOUT_OPTION

    cfg = make_env_config("metaworld", task=f"metaworld-{task}")
    pixels, agent_pos, states, rewards = [], [], [], []
    for seed in seeds:
        envs = make_env(cfg, n_envs=1, use_async_envs=False)
        vec = next(iter(next(iter(envs.values())).values()))
        full: list[np.ndarray] = []  # Meta-World's raw observations, as LeRobot's env receives them
        lerobot_env = vec.envs[0].unwrapped
        format_raw = lerobot_env._format_raw_obs
        lerobot_env._format_raw_obs = lambda raw, _f=format_raw, _full=full: (_full.append(np.array(raw, np.float64)), _f(raw))[1]
        obs, _ = vec.reset(seed=[seed], options={NEW_ROLLOUT_OPTION: True})
        frames, positions, gains = [obs["pixels"][0]], [obs["agent_pos"][0]], []
        for t in range(MAKE_ENV_STEPS):
            obs, reward, *_ = vec.step(_action(t)[None])
            frames.append(obs["pixels"][0])
            positions.append(obs["agent_pos"][0])
            gains.append(float(np.asarray(reward).reshape(-1)[0]))
        vec.close()
        pixels.append(frames)
        agent_pos.append(positions)
        states.append(full)
        rewards.append(gains)
    return {"make_env_pixels": np.asarray(pixels, np.uint8), "make_env_agent_pos": np.asarray(agent_pos, np.float64),
            "make_env_obs": np.asarray(states, np.float64), "make_env_rewards": np.asarray(rewards, np.float64),
            "make_env_mujoco": np.asarray(mujoco.__version__)}


def main(task: str, seed: int, steps: int, out: str) -> None:
    from lerobot.envs.metaworld import MetaworldEnv

    env = MetaworldEnv(task=f"metaworld-{task}", obs_type="pixels_agent_pos")
    obs, _ = env.reset(seed=seed)
    for t in range(steps):
        obs, *_ = env.step(_action(t))
    data = env._env.data
    state = {name: np.array(getattr(data, name), np.float64) for name in STATE}
    camera = env._env.model.camera("corner2")
    arena = arena_frame(task, state, camera="corner2", camera_pose="lerobot")
    np.savez(out, pixels=np.asarray(obs["pixels"]), arena_pixels=arena, cam_pos=camera.pos, cam_quat=camera.quat,
             cam_fovy=camera.fovy, episodes=same_episodes(task, [seed, seed + 1], 3), **state,
             **make_env_episodes(task, [seed, seed + 1]))
    env.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
