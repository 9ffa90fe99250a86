"""Checks that need gym-aloha, run by the tests under the ALOHA sim venv's interpreter.

``python sim_checks.py CHECK [ARGS...]`` prints one JSON object (the tests assert on it); the
test suite's own interpreter has no gym-aloha (its MuJoCo is another version).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def parity(steps: int = 15) -> dict:
    """The ``aloha`` env against gym-aloha's own env: same seeds, same float64 actions (what
    openpi's ALOHA sim client hands gym-aloha)."""
    import gymnasium as gym
    import gym_aloha  # noqa: F401  (registers the envs)

    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    out = {}
    for task, gym_id in (("transfer_cube", "gym_aloha/AlohaTransferCube-v0"), ("insertion", "gym_aloha/AlohaInsertion-v0")):
        # No camera while stepping (gym-aloha renders three per step, the slow half of this check);
        # render() draws the same top camera for the frame comparisons.
        ours = AlohaEnvironment(AlohaConfig(task=task, cameras=[]), num_envs=1)
        theirs = gym.make(gym_id, obs_type="pixels_agent_pos")
        worst_joint, frames_equal, rewards_equal = 0.0, True, True
        for seed in (7,):
            obs = ours.reset_envs([0], [seed])
            ref, _ = theirs.reset(seed=seed)
            rng = np.random.default_rng(seed)
            start = np.asarray(ref["agent_pos"], np.float64)
            for t in range(steps + 1):
                worst_joint = max(worst_joint, float(np.abs(obs["policy"]["joint_pos"][0] - ref["agent_pos"]).max()))
                if t in (0, steps):
                    frames_equal &= bool(np.array_equal(ours.render(0), ref["pixels"]["top"]))
                if t == steps:
                    break
                action = start + rng.normal(0.0, 0.1, 14)
                obs, reward, _, _, info = ours.step(action[None])
                ref, ref_reward, _, _, ref_info = theirs.step(action)
                rewards_equal &= float(reward[0]) == float(ref_reward) and bool(info["is_success"][0]) == bool(ref_info["is_success"])
        out[task] = {"joint_max_abs_diff": worst_joint, "frames_equal": frames_equal, "rewards_equal": rewards_equal}
        ours.close()
        theirs.close()
    return out


def stay(steps: int = 10) -> dict:
    """How far the joints move (max abs, rad or normalized gripper) in ``steps`` steps of
    transfer_cube seed 7, holding the env's stay action taken at reset, and holding zeros."""
    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    out = {}
    for name in ("stay", "zeros"):
        env = AlohaEnvironment(AlohaConfig(task="transfer_cube", cameras=[]), num_envs=1)
        obs = env.reset_envs([0], [7])
        start = obs["policy"]["joint_pos"][0].copy()
        action = env.stay_action(obs, 0) if name == "stay" else np.zeros(14)
        for _ in range(int(steps)):
            obs = env.step(np.asarray(action, np.float64)[None])[0]
        out[name] = float(np.abs(obs["policy"]["joint_pos"][0] - start).max())
        env.close()
    return out


def float32_actions(steps: int = 8) -> dict:
    """``action_dtype`` against gym-aloha stepped as each client steps it: float32 rows, as
    lerobot-eval 0.6 hands a LeRobot policy's action over (``scripts/lerobot_eval.py``
    l.303-307; ``SyncVectorEnv`` passes the rows on unchanged), and float64 rows, as openpi's
    client does. The actions are float32 values (what a LeRobot policy outputs), so the two
    dtypes differ only in gym-aloha's own arithmetic (the gripper targets). Per step: the
    actuator targets it set (``physics.data.ctrl``) and the joints."""
    import gymnasium as gym
    import gym_aloha  # noqa: F401  (registers the envs)

    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    seed = 3
    envs = {dtype: AlohaEnvironment(AlohaConfig(task="transfer_cube", cameras=[], action_dtype=dtype), num_envs=1)
            for dtype in ("float64", "float32")}
    refs = {dtype: gym.make("gym_aloha/AlohaTransferCube-v0", obs_type="pixels_agent_pos") for dtype in envs}
    equal = {dtype: True for dtype in envs}
    ctrl_differs = False
    for dtype in envs:
        obs = envs[dtype].reset_envs([0], [seed])
        refs[dtype].reset(seed=seed)
    start = obs["policy"]["joint_pos"][0]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        action = (start + rng.normal(0.0, 0.1, 14)).astype(np.float32)
        ctrl = {}
        for dtype, env in envs.items():
            obs, *_ = env.step(action[None].astype(np.float64))  # a server's float32 values, widened
            ref, *_ = refs[dtype].step(action.astype(dtype))
            ctrl[dtype] = env._envs[0].physics.data.ctrl.copy()
            theirs = refs[dtype].unwrapped._env.physics.data.ctrl
            equal[dtype] &= ctrl[dtype].tobytes() == theirs.tobytes()
            equal[dtype] &= obs["policy"]["joint_pos"][0].tobytes() == np.asarray(ref["agent_pos"], np.float64).tobytes()
        ctrl_differs |= ctrl["float32"].tobytes() != ctrl["float64"].tobytes()
    for dtype in envs:
        envs[dtype].close()
        refs[dtype].close()
    return {"equal_to_gym_aloha": equal, "float32_changes_ctrl": ctrl_differs}


def kinematics() -> dict:
    """:mod:`arena_aloha.kinematics` against MuJoCo's poses of the scene's gripper links."""
    import mujoco
    from gym_aloha.constants import ASSETS_DIR

    from arena_aloha import kinematics as kin

    model = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "bimanual_viperx_transfer_cube.xml"))
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    worst_pos = worst_rot = 0.0
    for _ in range(25):
        q = rng.uniform(kin.JOINT_LOW, kin.JOINT_HIGH, (2, 6))
        data.qpos[0:6], data.qpos[8:14] = q[0], q[1]
        mujoco.mj_forward(model, data)
        for arm, body, joints in ((kin.LEFT, "vx300s_left/gripper_link", q[0]), (kin.RIGHT, "vx300s_right/gripper_link", q[1])):
            rot = data.xmat[model.body(body).id].reshape(3, 3)
            pos = data.xpos[model.body(body).id] + rot @ kin.TOOL_OFFSET
            our_pos, our_rot, _, _ = kin.forward(arm, joints)
            worst_pos = max(worst_pos, float(np.abs(our_pos - pos).max()))
            worst_rot = max(worst_rot, float(np.abs(our_rot - rot).max()))
    return {"pos_max_abs_diff_m": worst_pos, "rot_max_abs_diff": worst_rot}


def cameras() -> dict:
    """Which ``camera_obs`` the env produces for which ``cameras``, and its action space."""
    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    none = AlohaEnvironment(AlohaConfig(task="transfer_cube", cameras=[]), num_envs=2)
    obs = none.reset_envs([0, 1], [3, 4])
    step_obs, *_ = none.step(np.tile(obs["policy"]["joint_pos"][:1], (2, 1)).astype(np.float32))
    video = none.render(1)
    result = {
        "no_cameras_keys": sorted(step_obs),
        "policy_shapes": {k: list(v.shape) for k, v in step_obs["policy"].items()},
        "video_frame": [list(video.shape), str(video.dtype)],
        "low": none.action_space.low.tolist(),
        "high": none.action_space.high.tolist(),
        "episode_info": none.episode_info(1),
    }
    none.close()
    names = ["cam_high", "cam_low", "cam_left_wrist", "cam_right_wrist"]
    four = AlohaEnvironment(AlohaConfig(task="insertion", cameras=names, image_height=48, image_width=64), num_envs=1)
    obs = four.reset_envs([0], [5])
    frames = obs["camera_obs"]
    result["camera_shapes"] = {k: [list(v.shape), str(v.dtype)] for k, v in frames.items()}
    result["camera_distinct"] = len({frames[k].tobytes() for k in frames}) == len(frames)
    result["insertion_object_pose"] = list(obs["policy"]["object_pose"].shape)
    four.close()
    return result


def perturbations() -> dict:
    """Each simulator perturbation against the unperturbed first observation of one seed."""
    from arena.envs.perturbed import wrap
    from arena_aloha.config import AlohaConfig
    from arena_aloha.env import AlohaEnvironment

    def first(**values):
        config = AlohaConfig(task="transfer_cube", cameras=["cam_high", "cam_left_wrist"], image_height=48,
                             image_width=64, perturbations=values)
        env = wrap(AlohaEnvironment(config, num_envs=1), AlohaEnvironment, config)
        obs = env.reset_envs([0], [5])
        env.close()
        return obs, type(env).__name__

    base, _ = first()
    result = {}
    for name, value in {"camera_shift": 0.1, "light_intensity": 0.3, "object_offset": 0.05, "object_mass": 2.0,
                        "nominal": None}.items():
        obs, kind = first(**({name: value} if value is not None else {"camera_shift": 0.0}))
        moved = obs["policy"]["object_pose"][0][:2] - base["policy"]["object_pose"][0][:2]
        result[name] = {
            "wrapped": kind,
            "top_equal": obs["camera_obs"]["cam_high_rgb"].tobytes() == base["camera_obs"]["cam_high_rgb"].tobytes(),
            "wrist_equal": obs["camera_obs"]["cam_left_wrist_rgb"].tobytes() == base["camera_obs"]["cam_left_wrist_rgb"].tobytes(),
            "joints_equal": obs["policy"]["joint_pos"].tobytes() == base["policy"]["joint_pos"].tobytes(),
            "object_moved_m": float(np.hypot(*moved)),
        }
    return result


if __name__ == "__main__":
    check, *args = sys.argv[1:]
    checks = {"parity": parity, "kinematics": kinematics, "cameras": cameras, "perturbations": perturbations,
              "float32_actions": float32_actions, "stay": stay}
    print(json.dumps(checks[check](*args)))
