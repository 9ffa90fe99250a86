"""Check arena's ``kinetix`` environment against kinetix-env's own, in the Kinetix venv.

``python -m arena_kinetix.reference --level grasp_easy --seed 3 --steps 40 [--other car_launch]``
builds :class:`arena_kinetix.env.KinetixEnvironment` and, independently, the environment as
kinetix-env's own API makes it (``load_from_json_file`` -> ``make_kinetix_env`` -> ``reset`` /
``step``, the seed's keys split the same way, the same noisy actions), steps both with the same
random actions and prints one JSON object: whether observations, rewards and ``done`` agree
bit for bit at every step, and timings (the first step's compile; the first step on
``--other``, a level with the same static parameters, which must reuse it).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default="grasp_easy")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--other", default=None)
    parser.add_argument("--pixels", action="store_true", help="also compare one pixel observation")
    args = parser.parse_args(argv)

    import jax
    from kinetix.environment.env import make_kinetix_env
    from kinetix.environment.spaces import ActionType, ObservationType
    from kinetix.util.saving import load_from_json_file

    from arena_kinetix.config import KinetixConfig
    from arena_kinetix.env import NOISE_STREAM, KinetixEnvironment

    config = KinetixConfig(task=args.level)
    began = time.perf_counter()
    arena_env = KinetixEnvironment(config, num_envs=1)
    obs = arena_env.reset_envs([0], [args.seed])
    built_s = time.perf_counter() - began

    # kinetix-env's own API, written out
    level, static, params = load_from_json_file(f"l/{args.level}.json")
    static = static.replace(frame_skip=config.frame_skip)
    own = make_kinetix_env(ActionType.CONTINUOUS, ObservationType.SYMBOLIC_FLAT, None, params, static, auto_reset=False)
    key, reset_key = jax.random.split(jax.random.PRNGKey(args.seed))
    own_obs, state = own.reset(reset_key, params, override_reset_state=level)
    state = state.replace(last_distance=jax.numpy.asarray(state.last_distance, jax.numpy.float32))
    noise = np.random.default_rng([args.seed, NOISE_STREAM])
    actions = np.random.default_rng(1234).uniform(-1, 1, (args.steps, 6)).astype(np.float32)

    same = bool(np.array_equal(obs["policy"]["state"][0], np.asarray(own_obs)))
    first_step_s = None
    steps = 0
    rewards = []
    for t in range(args.steps):
        started = time.perf_counter()
        obs, reward, terminated, truncated, info = arena_env.step(actions[t][None])
        if t == 0:
            first_step_s = time.perf_counter() - started
        noisy = np.clip(actions[t] + np.float32(config.action_noise) * noise.standard_normal(6).astype(np.float32), -1, 1)
        key, step_key = jax.random.split(key)
        own_obs, state, own_reward, done, _ = own.step(step_key, state, noisy, params)
        same &= bool(np.array_equal(obs["policy"]["state"][0], np.asarray(own_obs)))
        same &= float(reward[0]) == float(own_reward)
        same &= bool(terminated[0] or truncated[0]) == bool(done)
        rewards.append(float(reward[0]))
        steps += 1
        if bool(done):
            break
    result = {
        "same": same, "steps": steps, "built_s": round(built_s, 2), "first_step_s": round(first_step_s or 0.0, 2),
        "return": float(np.sum(rewards)), "state_shape": list(obs["policy"]["state"].shape),
    }
    if args.other:
        began = time.perf_counter()
        other = KinetixEnvironment(KinetixConfig(task=args.other), num_envs=1)
        other.step(np.zeros((1, 6), np.float32))
        result["other_level_first_step_s"] = round(time.perf_counter() - began, 3)
    if args.pixels:
        pixel_env = KinetixEnvironment(KinetixConfig(task=args.level, obs_type="pixels"), num_envs=1)
        frame = pixel_env.reset_envs([0], [args.seed])["camera_obs"]["pixels"][0]
        own_pixels = make_kinetix_env(ActionType.CONTINUOUS, ObservationType.PIXELS, None, params, static, auto_reset=False)
        raw = np.asarray(own_pixels.reset(reset_key, params, override_reset_state=level)[0].image)
        result["pixels_shape"] = list(frame.shape)
        result["pixels_same"] = bool(np.array_equal(frame, np.clip(np.rint(raw.transpose(1, 0, 2)[::-1] * 255), 0, 255).astype(np.uint8)))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
