"""Isaac Lab step times on this machine: ``Arena-Reach-Cube-v0`` through the ``isaaclab`` wrapper.

Run under the Isaac Lab venv (``arena isaaclab setup``)::

    ~/.local/share/arena/venvs/isaaclab/bin/python -m benchmarks.isaaclab_steps [--device cpu] [--steps 60]

For each configuration (envs x camera) it builds the env once, warms up, and times ``step``
with the expert's actions: median ms per step of 5 blocks, and the ratio to the 1-env,
no-camera baseline measured in the same run. Each configuration builds in a fresh process
(Isaac Lab keeps one simulation per process).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

CONFIGS = [(1, False), (2, False), (8, False), (2, True), (8, True)]


def measure(num_envs: int, cameras: bool, device: str, steps: int) -> dict:
    from arena_isaaclab.config import IsaacLabConfig
    from arena_isaaclab.env import IsaacLabEnvironment
    from arena_isaaclab.expert import expert_actions

    began = time.perf_counter()
    env = IsaacLabEnvironment(
        IsaacLabConfig(task="Arena-Reach-Cube-v0", device=device, cameras=cameras), num_envs=num_envs
    )
    build_s = time.perf_counter() - began
    obs = env.reset_envs(list(range(num_envs)), list(range(num_envs)))
    for _ in range(5):
        obs = env.step(expert_actions(obs))[0]
    blocks = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(max(1, steps // 5)):
            obs = env.step(expert_actions(obs))[0]
        blocks.append((time.perf_counter() - t) / max(1, steps // 5))
    env.close()
    return {"envs": num_envs, "camera": cameras, "ms_per_step": 1000 * statistics.median(blocks), "build_s": build_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.isaaclab_steps", description=__doc__)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--one", nargs=2, metavar=("ENVS", "CAMERA"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(measure(int(args.one[0]), args.one[1] == "1", args.device, args.steps)), flush=True)
        return 0
    rows = []
    for envs, camera in CONFIGS:
        argv = [sys.executable, "-m", "benchmarks.isaaclab_steps", "--device", args.device, "--steps", str(args.steps), "--one", str(envs), "1" if camera else "0"]
        done = subprocess.run(argv, capture_output=True, text=True)
        line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if not line:
            print(done.stdout[-2000:] + done.stderr[-2000:], file=sys.stderr)
            return 1
        rows.append(json.loads(line[0][7:]))
    base = rows[0]["ms_per_step"]
    print(f"| envs | camera 96x96 | ms / step | ms / env-step | vs 1 env, no camera | build s |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['envs']} | {'yes' if r['camera'] else 'no'} | {r['ms_per_step']:.0f} | {r['ms_per_step'] / r['envs']:.1f} | {r['ms_per_step'] / base:.2f}x | {r['build_s']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
