"""What batched serving changes against ``lerobot-eval --eval.batch_size=1`` (README, "Reference-exact
serving"): a measurement, not a test (minutes of CPU). Run it in arena's interpreter, with the
``lerobot`` venv made::

    python plugins/lerobot/tests/batching_measurement.py OUT_DIR [EPISODES]

A random ACT checkpoint on LeRobot's PushT config (``{type: pusht, episode_length: 40}``, as
``test_lerobot_env_bridge.py``) is evaluated from seed 1000 by LeRobot's own ``eval_policy`` as
``lerobot-eval`` calls it (``bridge_reference.py``, ``OMP_NUM_THREADS=1``) at batch size 1 and at
batch size 2, and by ``arena run`` (``lerobot_env``, two env workers, ``lerobot_remote``) three ways:
the server's defaults (batching, torch's thread count), batching on one torch thread
(``torch_threads: 1``), and ``reference_exact: true``. For each against lerobot-eval at batch size
1 it prints how many episodes have every action equal, the first step where they differ, the
largest difference there in float32 ulp and overall, the successes and the mean of the
``reward`` metric (lerobot-eval's ``avg_max_reward``) with its 95 % interval.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ENV = {"type": "pusht", "episode_length": 40}
SEED = 1000


def reference(root: Path, episodes: int, batch: int, build: bool) -> list[dict]:
    from arena.testing.venvs import benchmark_python

    out = root / f"ref-batch{batch}.json"
    args = ["both" if build else "eval", str(root / "pretrained_model"), json.dumps(ENV), str(episodes), str(batch), str(SEED), str(out)]
    done = subprocess.run([str(benchmark_python("lerobot")), str(HERE / "bridge_reference.py"), *args], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        sys.exit(done.stderr[-4000:])
    return json.loads(out.read_text())["episodes"]


def arena_runs(root: Path, episodes: int) -> dict[str, list[dict]]:
    from arena.rollout.trajectories import read_trajectory
    from arena.testing.experiments import run_tiny_experiment

    modes = {"batched": {}, "batched_one_thread": {"torch_threads": 1}, "reference_exact": {"reference_exact": True}}
    experiment = {"runs": {
        name: {
            "environment": {"type": "lerobot_env", "env": ENV, "workers": 2},
            "policy": {"type": "lerobot_remote", "policy_path": str(root / "pretrained_model"), "device": "cpu", **extra},
            "environment_builder": {"num_envs": 2, "seed": SEED},
            "rollout_limit": {"num_episodes": episodes},
            "trajectories": {"enabled": True, "cameras": False},
        } for name, extra in modes.items()
    }}
    os.environ.pop("OMP_NUM_THREADS", None)
    outcome = run_tiny_experiment(experiment, root / "arena")
    if outcome.exit_code:
        sys.exit(outcome.explain())
    runs = {}
    for name in modes:
        records = sorted(outcome.episodes(name), key=lambda r: r["episode_index"])
        for record in records:
            record["actions"] = read_trajectory(outcome.output_dir / name / record["trajectory"]).action.tolist()
        runs[name] = records
    return runs


def ulp(a: np.ndarray, b: np.ndarray) -> float:
    """The largest difference between two float32 arrays in units of the last place of ``b``."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.max(np.abs(a - b) / np.spacing(np.abs(b)))) if a.shape == b.shape else float("inf")


def compare(name: str, episodes: list[dict], expected: list[dict], rewards: list[float], successes: int) -> None:

    equal, firsts, first_ulps, worst = 0, [], [], 0.0
    for ours, ref in zip(episodes, expected, strict=True):
        a, b = np.asarray(ours["actions"], np.float32), np.asarray(ref["actions"], np.float32)
        n = min(len(a), len(b))
        differ = [t for t in range(n) if not np.array_equal(a[t], b[t])] + ([n] if len(a) != len(b) else [])
        if not differ:
            equal += 1
            continue
        t = differ[0]
        firsts.append(t)
        if t < n:
            first_ulps.append(ulp(a[t], b[t]))
        worst = max(worst, float(np.max(np.abs(a[:n] - b[:n]))))
    mean = float(np.mean(rewards))
    print(f"{name}: {equal}/{len(expected)} episodes equal; first differing step {sorted(firsts)}; "
          f"ulp there {sorted(round(u, 1) for u in first_ulps)}; largest |action difference| {worst:.3g}; "
          f"successes {successes}/{len(expected)}; mean max reward {mean:.4f}")


def main(out: str, episodes: int = 10) -> None:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=False)
    batch1 = reference(root, episodes, 1, build=True)
    batch2 = reference(root, episodes, 2, build=False)
    compare("lerobot-eval batch 2", batch2, batch1, [e["max_reward"] for e in batch2], sum(e["success"] for e in batch2))
    compare("lerobot-eval batch 1", batch1, batch1, [e["max_reward"] for e in batch1], sum(e["success"] for e in batch1))
    for name, records in arena_runs(root, episodes).items():
        compare(f"arena {name}", records, batch1, [r["metrics"]["reward"] for r in records],
                sum(r["outcome"] == "success" for r in records))
        result = json.loads((root / "arena" / name / "run_result.json").read_text())
        print(f"  {name}: run_result metrics {json.dumps(result.get('metrics', {}).get('reward'))}; "
              f"server torch_threads {result['model']['server_metadata'].get('torch_threads')}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10)
