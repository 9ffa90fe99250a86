"""Policy servers each launch backend's dry run starts for one experiment:
``python -m benchmarks.server_count [EXPERIMENT] [--nodes 1,4] [--json PATH]``.

Runs ``arena run EXPERIMENT --backend B --dry-run`` (nothing is submitted or started) for the
local, Slurm and Ray backends, with ``N`` nodes per server group (Slurm: ``launch.slurm.shards=N``,
array elements; Ray: ``launch.ray.nodes=N``; the local backend is one node), and reads the
number of policy servers from what each prints: the ``# policy servers started: N`` line of
Slurm and Ray, the ``# server …`` lines of the local plan. Beside it, the count of one server
per (run, node), what Slurm and Ray started before runs sharing a server task were grouped.
``examples/libero_pi05.yaml`` (40 runs, one openpi server task) should give the node count.
Not part of ``python -m benchmarks`` (that one times wires).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_STARTED = re.compile(r"^# policy servers started: (\d+)", re.M)


def dry_run(experiment: Path, backend: str, overrides: list[str]) -> str:
    """What ``arena run --dry-run`` prints for ``backend``.

    Raises:
        RuntimeError: the dry run failed (its output in the message).
    """
    with tempfile.TemporaryDirectory(prefix="arena-bench-servers-") as d:
        done = subprocess.run(
            [sys.executable, "-m", "arena", "run", str(experiment), "--backend", backend, "--dry-run",
             "--output-dir", str(Path(d) / "out"), *overrides],
            capture_output=True, text=True, timeout=300,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{backend} dry run failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def servers_started(text: str, backend: str) -> int:
    """The number of policy servers the dry run's plan starts."""
    if backend == "local":
        return sum(1 for line in text.splitlines() if line.startswith("# server "))
    found = _STARTED.search(text)
    if found is None:
        raise RuntimeError(f"the {backend} dry run printed no '# policy servers started' line")
    return int(found.group(1))


def run(experiment: Path, nodes: tuple[int, ...] = (1, 4)) -> dict:
    """Rows of ``backend, nodes, runs, servers, servers one per (run, node)``."""
    from arena.config import load_experiment
    from arena.launch.planning import plan_servers

    resolved = load_experiment(experiment)
    runs = len(resolved.runs)
    remote = sum(1 for plan in plan_servers(resolved).values() if plan.task is not None and not plan.external)
    rows = [{"backend": "local", "nodes": 1, "runs": runs,
             "servers": servers_started(dry_run(experiment, "local", []), "local"), "per_run_node": remote}]
    for n in nodes:
        for backend, option in (("slurm", f"launch.slurm.shards={n}"), ("ray", f"launch.ray.nodes={n}")):
            text = dry_run(experiment, backend, [option])
            rows.append({"backend": backend, "nodes": n, "runs": runs, "servers": servers_started(text, backend),
                         "per_run_node": remote * n})
    shown = experiment.resolve().relative_to(ROOT) if experiment.resolve().is_relative_to(ROOT) else experiment
    return {"experiment": str(shown), "rows": rows}


def table(result: dict) -> str:
    lines = [f"policy servers started by each backend's dry run of {result['experiment']}",
             f"{'backend':<8} {'nodes':>5} {'runs':>5} {'servers':>8} {'one per (run, node)':>20}"]
    for row in result["rows"]:
        lines.append(f"{row['backend']:<8} {row['nodes']:>5} {row['runs']:>5} {row['servers']:>8} {row['per_run_node']:>20}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_count", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", nargs="?", type=Path, default=ROOT / "examples" / "libero_pi05.yaml")
    parser.add_argument("--nodes", default="1,4", help="comma-separated nodes per server group (default 1,4)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    result = run(args.experiment, tuple(int(n) for n in args.nodes.split(",")))
    print(table(result), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
