"""Record a run that never started inside its OSMO task (``python -m arena_osmo.runner_failure``).

The runner task's script calls it when ``arena probe`` gives up on the policy server:
``python -m arena_osmo.runner_failure OUTPUT_DIR RUN REASON`` writes the run's ``status.json``
and ``run_result.json`` as ``failed`` with the reason; the runner's checkpoint publishes them,
so the report shows the run as failed (with why), not as missing.
"""

from __future__ import annotations

import sys
from pathlib import Path


def record_failure(output_dir: str | Path, run: str, reason: str) -> Path:
    """Write a failed status and run result for ``run`` under ``output_dir``; return the run's directory."""
    from arena.outputs.layout import STATUS_FILE, run_dir as run_directory
    from arena.outputs.records import StatusWriter, utc_now, write_run_result

    run_dir = run_directory(output_dir, run)
    run_dir.mkdir(parents=True, exist_ok=True)
    StatusWriter(run_dir / STATUS_FILE).write(state="failed", run=run, error=reason)
    now = utc_now()
    write_run_result(run_dir, run=run, state="failed", error=reason, started_at=now, finished_at=now)
    return run_dir


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m arena_osmo.runner_failure OUTPUT_DIR RUN REASON", file=sys.stderr)
        return 2
    record_failure(*args)
    print(f"arena: run {args[1]} failed: {args[2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
