"""Episodes claimed from the work queue vs static shards, on workers of unequal speed:
``python -m benchmarks.work_queue [--episodes 60] [--episode-s 0.1] [--json PATH]``.

Three worker processes, the last one slowed 3x (each of its episodes takes three times as
long), run one run's episodes twice in the same invocation: as static shards (worker ``k``
runs the episodes whose index is ``k`` mod 3, as ``launch.slurm.shards`` / ``launch.ray.work:
static`` assign them) and from the work queue (each worker claims the next episode when it is
free: :class:`arena.rollout.claims.ClaimedItems` over :class:`arena.outputs.workqueue.WorkQueue`,
the code ``arena run-one --queue`` runs, with the lease renewals of a real run). An episode is
a sleep, so the numbers are the scheduling's alone. Printed: each mode's finish time, the
ideal (all work spread over the workers' summed speed) and the ratios; the queue should be
within ~15 % of the ideal, static shards ~2x behind (the slow worker's third of the episodes).
Not part of ``python -m benchmarks`` (that one times wires).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLOWDOWNS = (1.0, 1.0, 3.0)

_WORKER = """
import sys, time
from pathlib import Path
from arena.outputs.workqueue import WorkQueue
from arena.rollout.claims import ClaimedItems
mode, queue_path, k, n, episodes, episode_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
Path(queue_path + f".ready{k}").touch()  # imported: the clock starts once every worker is
go = Path(queue_path + ".go")
while not go.exists():
    time.sleep(0.002)
if mode == "static":
    for index in range(k, episodes, n):
        time.sleep(episode_s)
else:
    items = ClaimedItems(WorkQueue(queue_path), "bench", owner=f"worker-{k}", lease_s=10.0, poll_s=0.01)
    while (item := items.take(wait=True)) is not None:
        time.sleep(episode_s)
        items.finish(item.episode_index)
    items.close()
"""


def run_mode(mode: str, episodes: int, episode_s: float, folder: Path) -> float:
    """Seconds from releasing the workers (all started and imported) until the last one ends."""
    from arena.outputs.workqueue import WorkQueue

    queue_path = folder / f"{mode}-{episodes}-{time.monotonic_ns()}.sqlite"  # its own ready / go files
    WorkQueue(queue_path).load("bench", [(i, i) for i in range(episodes)])
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, mode, str(queue_path), str(k), str(len(SLOWDOWNS)),
                          str(episodes), str(episode_s * slow)])
        for k, slow in enumerate(SLOWDOWNS)
    ]
    while not all(Path(f"{queue_path}.ready{k}").exists() for k in range(len(SLOWDOWNS))):
        if any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.005)
    began = time.perf_counter()
    Path(f"{queue_path}.go").touch()
    for proc in procs:
        if proc.wait() != 0:
            raise RuntimeError(f"a {mode} worker failed (exit {proc.returncode})")
    return time.perf_counter() - began


def run(episodes: int = 60, episode_s: float = 0.1) -> dict:
    """Both modes in one invocation; returns the times and ratios (see the module)."""
    with tempfile.TemporaryDirectory(prefix="arena-bench-queue-") as d:
        # what is left of the start-up (the release of the workers) is common to both; subtracted
        startup = run_mode("static", 0, episode_s, Path(d))
        static = run_mode("static", episodes, episode_s, Path(d))
        queue = run_mode("queue", episodes, episode_s, Path(d))
    ideal = episodes * episode_s / sum(1 / s for s in SLOWDOWNS)
    work_static, work_queue = static - startup, queue - startup
    return {
        "episodes": episodes, "episode_s": episode_s, "slowdowns": list(SLOWDOWNS), "startup_s": startup,
        "static_s": static, "queue_s": queue, "ideal_s": ideal,
        "queue_over_ideal": work_queue / ideal, "static_over_ideal": work_static / ideal,
        "static_over_queue": work_static / work_queue,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--episode-s", type=float, default=0.1, help="seconds of an episode on a full-speed worker")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    r = run(args.episodes, args.episode_s)
    print(f"{r['episodes']} episodes of {r['episode_s']:g} s on 3 workers (slowdowns {r['slowdowns']}); "
          f"releasing the workers {r['startup_s']:.2f} s, subtracted below")
    print(f"ideal (work / summed speed) {r['ideal_s']:.2f} s")
    print(f"queue          {r['queue_s'] - r['startup_s']:.2f} s = {r['queue_over_ideal']:.2f}x ideal")
    print(f"static shards  {r['static_s'] - r['startup_s']:.2f} s = {r['static_over_ideal']:.2f}x ideal")
    print(f"static / queue = {r['static_over_queue']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
