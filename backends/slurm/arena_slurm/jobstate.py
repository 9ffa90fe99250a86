"""Map a Slurm submission's jobs onto arena's run states, and finalize runs whose job ended.

Sources, most trusted first (``reference/anchors.md`` 2.7: many clusters disable ``sacct``
and ``squeue`` forgets a job once it ends): the job's own ``status.json`` when it holds a
final state; ``squeue`` for live jobs (``PENDING`` -> ``pending``; running -> the
status.json's ``starting_server``/``running``); ``sacct`` where accounting exists, for jobs
that ended without a final state (``CANCELLED`` -> ``cancelled``, anything else -> ``failed``);
without accounting such a job is ``cancelled`` after ``arena cancel``, else ``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.launch.base import Submission
from arena.rollout.records import StatusWriter, read_json, write_run_result

from arena_slurm import scheduler

FINAL = ("completed", "failed", "cancelled")
#: squeue states of a job that has not started its script yet.
QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED"}


@dataclass(frozen=True)
class Piece:
    """One Slurm job of a run: the whole run, or shard ``shard`` of ``shards`` (an array element)."""

    run: str
    shard: int | None
    shards: int
    job: str

    def work_dir(self, output_dir: Path) -> Path:
        base = output_dir / self.run
        return base if self.shard is None else base / "shards" / str(self.shard)

    def log_name(self) -> str:
        return f"slurm-{self.job}.log"


def pieces(submission: Submission) -> list[Piece]:
    """Every job of the submission, in run order, shards in index order."""
    shards: dict[str, int] = submission.extra.get("shards", {})
    found = []
    for run, ids in submission.ids.items():
        n = int(shards.get(run, 1))
        for key in sorted(ids, key=int):
            found.append(Piece(run=run, shard=int(key) if n > 1 else None, shards=n, job=ids[key]))
    return found


def piece_state(
    piece: Piece,
    output_dir: Path,
    live: dict[str, str] | None,
    accounting: dict[str, str] | None,
    cancel_requested: bool,
) -> tuple[str, str | None]:
    """``(arena state, error)`` of one job (see the module docstring for the rules)."""
    status = read_json(piece.work_dir(output_dir) / "status.json")
    status = status if isinstance(status, dict) else {}
    state = status.get("state")
    if state in FINAL:
        return state, status.get("error")
    if live is None:  # squeue unavailable (e.g. the output directory was copied off the cluster)
        return (state if state in ("pending", "starting_server", "running") else "pending"), None
    slurm = live.get(piece.job)
    if slurm is not None:
        if slurm in QUEUED:
            return "pending", None
        return (state if state in ("starting_server", "running") else "running"), None
    final = (accounting or {}).get(piece.job)
    if final == "CANCELLED" or (final is None and cancel_requested):
        return "cancelled", "cancelled (arena cancel / scancel) before the run finished"
    if final:
        return "failed", f"Slurm job {piece.job} ended {final} without a final state (see {piece.log_name()})"
    return "failed", (
        f"Slurm job {piece.job} is no longer queued and left no final state "
        f"(killed, or its node failed; see {piece.log_name()})"
    )


def job_states(
    submission: Submission, *, require_squeue: bool = False
) -> tuple[dict[Piece, tuple[str, str | None]], dict[str, str] | None]:
    """The state of every job and the ``squeue`` view of the live ones.

    Where ``squeue`` cannot be run the status.json files alone answer (``live`` is ``None``)
    unless ``require_squeue``.

    Raises:
        LaunchError: ``require_squeue`` and squeue is missing or failed.
    """
    from arena.errors import LaunchError

    output_dir = Path(submission.output_dir)
    all_pieces = pieces(submission)
    refs = [p.job for p in all_pieces]
    try:
        live: dict[str, str] | None = scheduler.squeue(refs)
    except LaunchError:
        if require_squeue:
            raise
        live = None
    ended = [p.job for p in all_pieces if live is not None and p.job not in live]
    accounting = scheduler.sacct(ended) if ended and _needs_accounting(all_pieces, output_dir, live or {}) else None
    cancel_requested = bool(submission.extra.get("cancel_requested_at"))
    states = {p: piece_state(p, output_dir, live, accounting, cancel_requested) for p in all_pieces}
    return states, live


def _needs_accounting(all_pieces: list[Piece], output_dir: Path, live: dict[str, str]) -> bool:
    """Ask sacct only for ended jobs without a final status.json (the usual case needs none)."""
    for piece in all_pieces:
        if piece.job in live:
            continue
        status = read_json(piece.work_dir(output_dir) / "status.json")
        if not (isinstance(status, dict) and status.get("state") in FINAL):
            return True
    return False


def finalize(submission: Submission, states: dict[Piece, tuple[str, str | None]]) -> list[Piece]:
    """Write the final status.json and run_result.json of every ended job that lacks them.

    A job that failed before its runner wrote a result (server never ready, killed, never
    started) gets a ``failed`` or ``cancelled`` result keeping whatever records it wrote, so
    the report shows it as failed, not missing. Returns the pieces it wrote.
    """
    output_dir = Path(submission.output_dir)
    manifest = read_json(output_dir / "manifest.json") or {}
    written = []
    for piece, (state, error) in states.items():
        if state not in FINAL:
            continue
        work_dir = piece.work_dir(output_dir)
        status = read_json(work_dir / "status.json")
        status = status if isinstance(status, dict) else {}
        result = read_json(work_dir / "run_result.json")
        if isinstance(result, dict) and result.get("state") in FINAL:
            continue
        work_dir.mkdir(parents=True, exist_ok=True)
        if status.get("state") not in FINAL:
            fields = {k: v for k, v in status.items() if k not in ("state", "error")}
            StatusWriter(work_dir / "status.json", **fields).write(state=state, error=error)
        write_run_result(
            work_dir,
            run=piece.run,
            state=state,
            error=error,
            server=status.get("server"),
            episodes_total=_episodes_total(manifest, piece),
            shard=None if piece.shard is None else (piece.shard, piece.shards),
        )
        written.append(piece)
    return written


def _episodes_total(manifest: dict[str, Any], piece: Piece) -> int | None:
    entry = (manifest.get("runs") or {}).get(piece.run) or {}
    items = entry.get("work_items")
    if not isinstance(items, list):
        return entry.get("num_episodes")
    if piece.shard is None:
        return len(items)
    return sum(1 for item in items if int(item.get("episode_index", -1)) % piece.shards == piece.shard)
