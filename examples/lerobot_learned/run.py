"""A learned policy, end to end, on a CPU: record expert episodes with arena, export them as a
LeRobotDataset, train a small ACT policy with ``lerobot-train``, serve the checkpoint with
``arena serve lerobot`` and evaluate it against zero actions with arena.

    python examples/lerobot_learned/run.py [--out DIR] [--episodes 50] [--steps 1000]
                                           [--eval-episodes 50]

Runs under arena's interpreter (the one with ``arena`` on its path and ``arena-plugin-lerobot``
installed); training runs under the ``lerobot`` model venv's interpreter (``arena venv setup
lerobot``), the one ``arena serve lerobot`` and ``arena export lerobot`` use. Stages, each a
command a user could type (printed before it runs):

1. ``arena run record.yaml``: Meta-World reach-v3, the scripted expert, ``--episodes`` episodes
   (seeds 0, 1, ...) recorded as trajectories (``OUT/record``);
2. ``arena export lerobot OUT/record --run expert --to OUT/dataset --adapter
   lerobot/metaworld_environment_state``: the LeRobotDataset (``observation.state`` float32 (4,),
   ``observation.environment_state`` float32 (39,), ``action`` float32 (4,), 80 fps);
3. ``python -m lerobot.scripts.lerobot_train`` (the small ACT of :data:`ACT_FLAGS`,
   ``--steps``) into ``OUT/train``;
4. ``arena run evaluate.yaml``: the checkpoint (``lerobot_remote``) and zero actions on
   ``--eval-episodes`` episodes, seeds 1000, 1001, ... (``OUT/evaluate``).

Then prints each stage's wall time and both runs' success rates with their 95% Wilson
intervals (from each run's ``run_result.json``), and writes them to ``OUT/summary.json``:
``{"stages": {name: seconds}, "runs": {run: {"success", "episodes", "success_rate", "ci95"}},
"episodes", "steps", "eval_episodes", "checkpoint"}``.

Threads: every stage runs with ``OMP_NUM_THREADS=1`` unless it is set already. The policy is
small (0.67M parameters); measured on a 2-core machine shared with other work, one ACT training
step (batch 32) took 0.11 s with one torch thread and 2.57 s with two, which spin against each
other and against everything else.

Exit codes: 0 every stage succeeded; otherwise the failing stage's exit code (2 a wrong option or
configuration, 3 a failed run, export or training), with the stage named on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORD_RUN = "expert"
EVAL_RUNS = ("learned", "zero")
#: The adapter the dataset is exported with and the checkpoint served with: LeRobot's
#: Meta-World features plus the whole state (goal included) as observation.environment_state.
ADAPTER = "metaworld_environment_state"
#: The small ACT: state inputs only (no image, so no vision backbone), no VAE, 0.67M parameters.
ACT_FLAGS = (
    "--policy.type=act",
    "--policy.dim_model=128",
    "--policy.n_heads=4",
    "--policy.dim_feedforward=512",
    "--policy.n_encoder_layers=2",
    "--policy.n_decoder_layers=1",
    "--policy.chunk_size=20",
    "--policy.n_action_steps=20",
    "--policy.use_vae=false",
    "--policy.optimizer_lr=1e-3",
)


class StageFailed(Exception):
    def __init__(self, stage: str, code: int) -> None:
        super().__init__(f"stage {stage} failed (exit {code})")
        self.stage = stage
        self.code = code


def arena_command() -> list[str]:
    """``arena`` of this interpreter (``python -m arena``)."""
    return [sys.executable, "-m", "arena"]


def lerobot_python(explicit: str | None) -> str:
    """The interpreter that trains: ``--lerobot-python``, else the ``lerobot`` model venv's."""
    if explicit:
        return explicit
    from arena.venvs import venv_python

    python = venv_python("lerobot")
    if not python.exists():
        print(f"run.py: the lerobot venv ({python}) does not exist: run `arena venv setup lerobot`", file=sys.stderr)
        raise SystemExit(2)
    return str(python)


def train_command(python: str, dataset: Path, out: Path, steps: int, batch_size: int) -> list[str]:
    """``lerobot-train`` on the local dataset, offline (no Hub, no W&B, no eval env)."""
    return [
        python, "-m", "lerobot.scripts.lerobot_train",
        f"--dataset.repo_id=local/{RECORD_RUN}", f"--dataset.root={dataset}",
        *ACT_FLAGS,
        "--policy.device=cpu", "--policy.push_to_hub=false", "--wandb.enable=false",
        f"--steps={steps}", f"--batch_size={batch_size}", "--num_workers=0",
        "--env_eval_freq=0", f"--save_freq={steps}", f"--log_freq={max(1, min(100, steps))}",
        f"--output_dir={out}",
    ]  # fmt: skip


def run_stage(name: str, command: list[str], env: dict[str, str], stages: dict[str, float]) -> None:
    """Run ``command``, echoing it; record its wall time in ``stages``; raise on failure."""
    print(f"\n== {name}: {' '.join(command)}", flush=True)
    start = time.monotonic()
    code = subprocess.call(command, env=env)
    stages[name] = round(time.monotonic() - start, 1)
    if code != 0:
        raise StageFailed(name, code)


def read_results(evaluate: Path) -> dict[str, dict]:
    """Each evaluated run's success count, episodes, rate and 95% interval (``run_result.json``)."""
    runs = {}
    for run in EVAL_RUNS:
        result = json.loads((evaluate / run / "run_result.json").read_text())
        runs[run] = {
            "success": result["counts"]["success"],
            "episodes": result["episodes"],
            "success_rate": result["success_rate"],
            "ci95": result["ci95"],
        }
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("outputs/lerobot_learned"), help="directory of every stage's output (must not exist)")
    parser.add_argument("--episodes", type=int, default=50, help="expert episodes recorded (seeds 0..N-1)")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--batch-size", type=int, default=32, help="training batch size")
    parser.add_argument("--eval-episodes", type=int, default=50, help="episodes per evaluated policy (seeds 1000..)")
    parser.add_argument("--lerobot-python", help="interpreter with LeRobot (default: the lerobot venv's)")
    args = parser.parse_args(argv)
    if min(args.episodes, args.steps, args.batch_size, args.eval_episodes) < 1:
        parser.error("--episodes, --steps, --batch-size and --eval-episodes must be >= 1")
    out = args.out.resolve()
    if out.exists() and any(out.iterdir()):
        print(f"run.py: {out} exists and is not empty; choose another --out", file=sys.stderr)
        return 2
    python = lerobot_python(args.lerobot_python)
    env = {**os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    arena = arena_command()
    record, dataset, train, evaluate = out / "record", out / "dataset", out / "train", out / "evaluate"
    checkpoint = train / "checkpoints" / "last" / "pretrained_model"
    stages: dict[str, float] = {}
    try:
        run_stage(
            "record",
            [*arena, "run", str(HERE / "record.yaml"), "--output-dir", str(record),
             f"shared.rollout_limit.num_episodes={args.episodes}"],
            env, stages,
        )  # fmt: skip
        run_stage(
            "export",
            [*arena, "export", "lerobot", str(record), "--run", RECORD_RUN, "--to", str(dataset),
             "--adapter", f"lerobot/{ADAPTER}"],
            env, stages,
        )  # fmt: skip
        run_stage("train", train_command(python, dataset, train, args.steps, args.batch_size), env, stages)
        run_stage(
            "evaluate",
            [*arena, "run", str(HERE / "evaluate.yaml"), "--output-dir", str(evaluate),
             f"shared.rollout_limit.num_episodes={args.eval_episodes}",
             f"runs.learned.policy.policy_path={checkpoint}"],
            env, stages,
        )  # fmt: skip
    except StageFailed as exc:
        print(f"run.py: {exc}; its output is above, the stage's files under {out}", file=sys.stderr)
        return exc.code
    runs = read_results(evaluate)
    summary = {
        "episodes": args.episodes,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "eval_episodes": args.eval_episodes,
        "checkpoint": str(checkpoint),
        "stages": stages,
        "total_s": round(sum(stages.values()), 1),
        "runs": runs,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n== lerobot_learned: {args.episodes} expert episodes, ACT trained {args.steps} steps")
    for name, seconds in stages.items():
        print(f"   {name:<9} {seconds:8.1f} s")
    print(f"   {'total':<9} {summary['total_s']:8.1f} s")
    for run, result in runs.items():
        rate, ci = result["success_rate"], result["ci95"]
        shown = f"{rate:.0%} (95% CI {ci[0]:.0%}-{ci[1]:.0%})" if rate is not None and ci else "no counted episode"
        print(f"   {run:<9} {result['success']}/{result['episodes']} = {shown}")
    print(f"   summary: {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
