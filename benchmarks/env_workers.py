"""Benchmark 4: env-steps/s of ``franka_kitchen`` with its three cameras, in-process vs workers.

Both environments are built once with the same config (three 180x320 DROID cameras, fast
rendering, the machine's default OpenGL platform) and ``num_envs = min(64, 2 x usable
cores)``; the baseline is ``workers: 0`` (every env stepped and rendered one after another in
one process), the case ``workers: auto`` (one worker per usable core). Zero actions; build time
and a warm-up excluded. Rounds alternate between the two, so load from other processes hits
both alike; the figure is the median round.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from arena.envs.franka_kitchen import FrankaKitchenConfig, FrankaKitchenEnvironment
from arena.envs.workers import build_environment, usable_cores
from benchmarks.common import table


def _steps_per_s(env, steps: int) -> float:
    actions = np.zeros((env.num_envs, 8), np.float32)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    return steps * env.num_envs / (time.perf_counter() - start)


def run(quick: bool) -> dict:
    cores = usable_cores()
    num_envs = min(64, 2 * cores)
    steps, rounds = (3, 3) if quick else (10, 5)
    envs = {}
    try:
        for workers in (0, "auto"):
            config = FrankaKitchenConfig(task="microwave", workers=workers)
            env = envs[workers] = build_environment(FrankaKitchenEnvironment, config, num_envs=num_envs)
            env.reset_envs(list(range(num_envs)), list(range(num_envs)))
            _steps_per_s(env, 1)  # warm-up: first frames, caches
        rates: dict = {0: [], "auto": []}
        for _ in range(rounds):
            for workers, env in envs.items():
                rates[workers].append(_steps_per_s(env, steps))
    finally:
        for env in envs.values():
            env.close()
    base, case = statistics.median(rates[0]), statistics.median(rates["auto"])
    rows = [
        [f"franka_kitchen, 3 cameras 180x320, {num_envs} envs", f"{case:.1f}", f"{base:.1f}", f"{case / base:.2f}x"],
    ]
    workers = len(envs["auto"].plan.slices) if hasattr(envs["auto"], "plan") else 0
    text = table([f"case ({workers} workers on {cores} usable cores)", "workers: auto env-steps/s",
                  "workers: 0 env-steps/s", "ratio"], rows)
    return {"name": "env_workers", "table": text, "ratio": case / base, "auto": case, "in_process": base,
            "num_envs": num_envs, "cores": cores}
