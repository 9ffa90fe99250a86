"""A learned policy, end to end, on a CPU: record expert episodes with arena, export them as a
LeRobotDataset, train a small ACT policy with ``lerobot-train`` once per training seed, serve
each checkpoint with ``arena serve lerobot`` and evaluate it against zero actions with arena.

    python examples/lerobot_learned/run.py [--out DIR] [--episodes 50] [--steps 1000]
                                           [--eval-episodes 50] [--train-seeds 0[,1,2...]]

Runs under arena's interpreter (the one with ``arena`` on its path and ``arena-plugin-lerobot``
installed); training runs under the ``lerobot`` model venv's interpreter (``arena venv setup
lerobot``: LeRobot 0.6.1), the one ``arena serve lerobot`` and ``arena export lerobot`` use.
Stages, each a command a user could type (printed before it runs):

1. ``arena run record.yaml``: Meta-World reach-v3, the scripted expert, ``--episodes`` episodes
   (seeds 0, 1, ...) recorded as trajectories (``OUT/record``), once;
2. ``arena export lerobot OUT/record --run expert --to OUT/dataset --adapter
   lerobot/metaworld_environment_state``: the LeRobotDataset (``observation.state`` float32 (4,),
   ``observation.environment_state`` float32 (39,), ``action`` float32 (4,), 80 fps), once;
3. per training seed S of ``--train-seeds``: ``python -m lerobot.scripts.lerobot_train
   --seed=S`` (the small ACT of :data:`ACT_FLAGS`, ``--steps``) into ``OUT/seedS/train``;
4. per training seed S: ``arena run evaluate.yaml``: that checkpoint (``lerobot_remote``) and
   zero actions on ``--eval-episodes`` episodes, seeds 1000, 1001, ... (``OUT/seedS/evaluate``;
   the same evaluation episodes for every training seed).

Then prints each stage's wall time with the 1-minute load average at its start and end
(``/proc/loadavg``; the machine's other work slows every stage), each training seed's success
counts with their 95% Wilson intervals (from each run's ``run_result.json``) and the range of
the learned success over the training seeds, and writes all of it to ``OUT/summary.json``
(rewritten after every seed, so an interrupted run keeps what finished)::

    {"command", "episodes", "steps", "batch_size", "eval_episodes", "train_seeds",
     "machine": {"cpus", "cpu_model", "arena_python", "lerobot", "torch", "omp_num_threads"},
     "stages": {name: {"wall_s", "loadavg_start", "loadavg_end"}},   # "record", "export",
                                                    # "train seed=S", "evaluate seed=S"
     "total_s",
     "seeds": [{"seed", "checkpoint", "runs": {run: {"success", "episodes", "success_rate", "ci95"}}}],
     "learned_range": {"seeds", "success_min", "success_max", "rate_min", "rate_max", "episodes"}}

``loadavg_*`` are the three load averages (1, 5, 15 min) or null where ``/proc/loadavg`` does
not exist.

Why several training seeds: ``lerobot-train`` is deterministic for one seed on one machine (the
same checkpoint, byte for byte), but not across machines (floating-point results of the CPU's
kernels differ), and a 1,000-step ACT's success moves by several episodes in 50 with either the
seed or the machine; a range over seeds says how much one figure can be trusted.

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
import platform
import shlex
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


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``: distinct integers >= 0, in the order given.

    Raises:
        argparse.ArgumentTypeError: empty, not an integer, negative or repeated.
    """
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas (e.g. 0,1,2), got {text!r}") from None
    if any(seed < 0 for seed in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"training seeds must be distinct and >= 0, got {text!r}")
    return seeds


def train_command(python: str, dataset: Path, out: Path, steps: int, batch_size: int, seed: int) -> list[str]:
    """``lerobot-train`` on the local dataset with training seed ``seed``, offline (no Hub, no
    W&B, no eval env)."""
    return [
        python, "-m", "lerobot.scripts.lerobot_train",
        f"--dataset.repo_id=local/{RECORD_RUN}", f"--dataset.root={dataset}",
        *ACT_FLAGS,
        "--policy.device=cpu", "--policy.push_to_hub=false", "--wandb.enable=false",
        f"--seed={seed}", f"--steps={steps}", f"--batch_size={batch_size}", "--num_workers=0",
        "--env_eval_freq=0", f"--save_freq={steps}", f"--log_freq={max(1, min(100, steps))}",
        f"--output_dir={out}",
    ]  # fmt: skip


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (``os.getloadavg``: ``/proc/loadavg`` on Linux),
    or None where the system has none."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def machine(python: str, env: dict[str, str]) -> dict:
    """What the timings and the trained weights depend on: CPUs, CPU model, the versions that train."""
    cpu_model = platform.processor() or None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    probe = "from importlib.metadata import version as v; print(v('lerobot'), v('torch'))"
    try:
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
        versions = found.stdout.split() if found.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        versions = []
    lerobot, torch = versions if len(versions) == 2 else (None, None)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "arena_python": platform.python_version(),
        "lerobot": lerobot,
        "torch": torch,
        "omp_num_threads": env.get("OMP_NUM_THREADS"),
    }


def run_stage(name: str, command: list[str], env: dict[str, str], stages: dict[str, dict]) -> None:
    """Run ``command``, echoing it; record its wall time and the load average around it in
    ``stages``; raise on failure."""
    print(f"\n== {name}: {shlex.join(command)}", flush=True)
    load_start = load_average()
    start = time.monotonic()
    code = subprocess.call(command, env=env)
    stages[name] = {"wall_s": round(time.monotonic() - start, 1), "loadavg_start": load_start, "loadavg_end": load_average()}
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


def learned_range(seeds: list[dict]) -> dict | None:
    """The lowest and highest learned success over the evaluated training seeds (None before any)."""
    learned = [entry["runs"]["learned"] for entry in seeds]
    rates = [r["success_rate"] for r in learned if r["success_rate"] is not None]
    if not rates:
        return None
    return {
        "seeds": len(learned),
        "success_min": min(r["success"] for r in learned),
        "success_max": max(r["success"] for r in learned),
        "rate_min": min(rates),
        "rate_max": max(rates),
        "episodes": sorted({r["episodes"] for r in learned}),
    }


def _rate(result: dict) -> str:
    rate, ci = result["success_rate"], result["ci95"]
    if rate is None or not ci:
        return f"{result['success']}/{result['episodes']} (no counted episode)"
    return f"{result['success']}/{result['episodes']} = {rate:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def _load(values: list[float] | None) -> str:
    return "n/a" if values is None else f"{values[0]:.2f}"


def print_summary(summary: dict) -> None:
    """The summary as a reader wants it: what ran, on what, how long, and the success rates."""
    m = summary["machine"]
    print(
        f"\n== lerobot_learned: {summary['episodes']} expert episodes, ACT trained {summary['steps']} steps "
        f"(batch {summary['batch_size']}) per training seed, {summary['eval_episodes']} evaluated episodes per policy"
    )
    print(f"   command: {summary['command']}")
    print(
        f"   machine: {m['cpus']} CPUs ({m['cpu_model']}), LeRobot {m['lerobot']}, torch {m['torch']}, "
        f"OMP_NUM_THREADS={m['omp_num_threads']}"
    )
    print(f"\n   {'stage':<20} {'wall s':>8}   load average (1 min) at start -> end")
    for name, stage in summary["stages"].items():
        print(f"   {name:<20} {stage['wall_s']:8.1f}   {_load(stage['loadavg_start'])} -> {_load(stage['loadavg_end'])}")
    print(f"   {'total':<20} {summary['total_s']:8.1f}")
    print("\n   training seed   learned (ACT), success [95% Wilson CI]   zero actions")
    for entry in summary["seeds"]:
        runs = entry["runs"]
        print(f"   {entry['seed']:<15} {_rate(runs['learned']):<40} {_rate(runs['zero'])}")
    spread = summary["learned_range"]
    if spread and spread["seeds"] > 1:
        episodes = "/".join(str(n) for n in spread["episodes"])
        print(
            f"   range over {spread['seeds']} training seeds: {spread['success_min']}/{episodes} to "
            f"{spread['success_max']}/{episodes} ({spread['rate_min']:.0%} to {spread['rate_max']:.0%})"
        )
    print(f"\n   summary: {summary['out']}/summary.json")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The description as written, every option's default shown."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=_HelpFormatter)
    parser.add_argument(
        "--out", type=Path, default=Path("outputs/lerobot_learned"), help="directory of every stage's output (must not exist or be empty)"
    )
    parser.add_argument("--episodes", type=int, default=50, help="expert episodes recorded (seeds 0..N-1)")
    parser.add_argument("--steps", type=int, default=1000, help="training steps")
    parser.add_argument("--batch-size", type=int, default=32, help="training batch size")
    parser.add_argument("--eval-episodes", type=int, default=50, help="episodes per evaluated policy (seeds 1000..)")
    parser.add_argument(
        "--train-seeds", type=parse_seeds, default="0", metavar="S[,S...]",
        help="lerobot-train --seed values, one trained and evaluated checkpoint each (e.g. 0,1,2)",
    )  # fmt: skip
    parser.add_argument(
        "--lerobot-python", default=argparse.SUPPRESS, help="interpreter with LeRobot (when not given: the lerobot venv's)"
    )
    args = parser.parse_args(argv)
    if min(args.episodes, args.steps, args.batch_size, args.eval_episodes) < 1:
        parser.error("--episodes, --steps, --batch-size and --eval-episodes must be >= 1")
    out = args.out.resolve()
    if out.exists() and any(out.iterdir()):
        print(f"run.py: {out} exists and is not empty; choose another --out", file=sys.stderr)
        return 2
    python = lerobot_python(getattr(args, "lerobot_python", None))
    env = {**os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    arena = arena_command()
    out.mkdir(parents=True, exist_ok=True)
    record, dataset = out / "record", out / "dataset"
    stages: dict[str, dict] = {}
    summary = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv] if argv is None else ["run.py", *argv]),
        "out": str(out),
        "episodes": args.episodes,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "eval_episodes": args.eval_episodes,
        "train_seeds": args.train_seeds,
        "machine": machine(python, env),
        "stages": stages,
        "total_s": 0.0,
        "seeds": [],
        "learned_range": None,
    }

    def write_summary() -> None:
        summary["total_s"] = round(sum(stage["wall_s"] for stage in stages.values()), 1)
        summary["learned_range"] = learned_range(summary["seeds"])
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

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
        for seed in args.train_seeds:
            train, evaluate = out / f"seed{seed}" / "train", out / f"seed{seed}" / "evaluate"
            checkpoint = train / "checkpoints" / "last" / "pretrained_model"
            run_stage(f"train seed={seed}", train_command(python, dataset, train, args.steps, args.batch_size, seed), env, stages)
            run_stage(
                f"evaluate seed={seed}",
                [*arena, "run", str(HERE / "evaluate.yaml"), "--output-dir", str(evaluate),
                 f"shared.rollout_limit.num_episodes={args.eval_episodes}",
                 f"runs.learned.policy.policy_path={checkpoint}"],
                env, stages,
            )  # fmt: skip
            summary["seeds"].append({"seed": seed, "checkpoint": str(checkpoint), "runs": read_results(evaluate)})
            write_summary()
    except StageFailed as exc:
        write_summary()
        print(f"run.py: {exc}; its output is above, the stage's files under {out}", file=sys.stderr)
        return exc.code
    print_summary(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
