"""The collector task of an OSMO workflow (``python -m arena_osmo.collector PLAN SNAPSHOT OUTPUT``).

Runs in the workflow's last group, on a CPU node, after every runner task COMPLETED (the
runners' exit codes 0-3 all COMPLETE, so a failed run still gets here). ``PLAN`` is JSON
``{"experiment": NAME, "workflow": ID, "runs": {RUN: INPUT_DIR}}`` where each ``INPUT_DIR``
is the ``{{input:<runner task>}}`` download directory holding ``<RUN>/``. It copies each
run's directory into ``OUTPUT``, writes the snapshot and ``manifest.json`` of the workflow's
runs, then ``experiment_result.json`` and ``index.html``; OSMO uploads ``OUTPUT`` to
``launch.osmo.output_url``. A run whose directory is missing, or that ended without a final
state, is recorded as failed so the report shows it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

MARKER = "osmo_collector.json"
_FINAL = ("completed", "failed", "cancelled")


def collect_outputs(plan: dict[str, Any], snapshot: str | Path, output: str | Path) -> dict[str, Any]:
    """Merge the runs of ``plan`` into ``output`` and build the report there; returns the result."""
    from arena.results.aggregate import build_experiment_result
    from arena.results.report import write_report
    from arena.rollout.records import read_json
    from arena_osmo.runner_failure import record_failure

    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(snapshot, out / "experiment.yaml")
    _write_manifest(out)
    for run, input_dir in plan["runs"].items():
        src = Path(input_dir) / run
        dst = out / run
        if not src.is_dir():
            record_failure(out, run, f"the runner task uploaded no output for run '{run}'")
            continue
        shutil.copytree(src, dst, dirs_exist_ok=True)
        result = read_json(dst / "run_result.json")
        status = read_json(dst / "status.json") or {}
        if not isinstance(result, dict) and status.get("state") not in _FINAL:
            record_failure(out, run, "arena run-one ended without a final state (see the runner task's log)")
    result = build_experiment_result(out)
    write_report(out)
    marker = {"experiment": plan.get("experiment"), "workflow": plan.get("workflow"), "runs": list(plan["runs"])}
    (out / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return result


def _write_manifest(out: Path) -> None:
    from arena.config import load_experiment
    from arena.errors import ArenaError
    from arena.rollout.workitems import write_manifest

    try:
        experiment = load_experiment(out / "experiment.yaml", check_requires=False, trust_snapshot=True)
    except ArenaError as exc:  # the report then lists the runs it finds, without planned totals
        print(f"arena collector: no manifest ({exc})", file=sys.stderr)
        return
    write_manifest(experiment, out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m arena_osmo.collector PLAN.json SNAPSHOT.yaml OUTPUT_DIR", file=sys.stderr)
        return 2
    plan = json.loads(Path(args[0]).read_text())
    result = collect_outputs(plan, args[1], args[2])
    for name, run in result["runs"].items():
        print(f"{name}: {run['state']} {run['k']}/{run['n']} (errors {run['errors']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
