"""Checks that need LIBERO, run under the LIBERO venv's interpreter by the tests
(``python libero_checks.py CHECK``; prints one JSON object the tests assert on).
"""

from __future__ import annotations

import json
import sys

import numpy as np


def float32_actions(steps: int = 2) -> dict:
    """``action_dtype: float32`` on the real simulator: what LIBERO's ``step`` receives, next to
    what lerobot-eval 0.6 hands it (its policy's action as float32 numpy, ``scripts/
    lerobot_eval.py`` l.303-307; LeRobot's ``LiberoEnv.step``, ``envs/libero.py`` l.366-374,
    passes the float32 row on). float64 actions that float32 cannot hold, so rounding shows."""
    from arena_libero.env import LiberoConfig, LiberoEnvironment

    config = LiberoConfig(suite="libero_spatial", task=0, image_size=32, cameras=False, num_steps_wait=0,
                          action_dtype="float32")
    env = LiberoEnvironment(config, num_envs=1)
    received: list[np.ndarray] = []
    sim = env._sims[0]
    step = sim.step

    def recording(action):
        received.append(np.array(action, copy=True))
        return step(action)

    sim.step = recording
    try:
        env.reset_envs([0], [5])
        rng = np.random.default_rng(0)
        sent = [rng.uniform(-0.5, 0.5, (1, 7)) for _ in range(steps)]
        for action in sent:
            env.step(action)
    finally:
        env.close()
    lerobot = [action[0].astype(np.float32) for action in sent]  # lerobot-eval's row
    return {
        "dtypes": [str(a.dtype) for a in received],
        "equal_to_lerobot_row": all(a.tobytes() == b.tobytes() for a, b in zip(received, lerobot, strict=True)),
        "rounded": any(a.astype(np.float64).tobytes() != b[0].tobytes() for a, b in zip(received, sent)),
        "protocol_action_dtype": env.protocol().get("action_dtype"),
    }


if __name__ == "__main__":
    check, *args = sys.argv[1:]
    print(json.dumps({"float32_actions": float32_actions}[check](*args)))
