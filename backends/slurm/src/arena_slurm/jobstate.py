"""Map a Slurm submission's jobs onto arena's run states, and finalize runs whose job ended.

Sources, most trusted first (``reference/anchors.md`` 2.7: many clusters disable ``sacct``
and ``squeue`` forgets a job once it ends): the job's own ``status.json`` when it holds a
final state; ``squeue`` for live jobs (``PENDING`` -> ``pending``; running -> the
status.json's ``starting_server``/``running``); for jobs that ended without a final state,
``sacct`` where accounting exists, else ``scontrol show job`` while slurmctld still remembers
the job (``MinJobAge``): ``CANCELLED`` -> ``cancelled``, ``TIMEOUT`` -> ``failed`` naming
``launch.slurm.time``, ``OUT_OF_MEMORY`` -> ``failed`` naming the memory options, anything
else -> ``failed``; with neither such a job is ``cancelled`` after ``arena cancel``, else
``failed``. (The job script itself records a time limit before it is reached, from the
signal Slurm sends ahead of it, so this is the fallback.) A ``cancelled`` status.json that
nobody asked for (no ``arena cancel``) is checked against Slurm too: a runner killed by the
SIGTERM of a time limit records ``cancelled``, which Slurm's ``TIMEOUT`` turns into ``failed``.

A pending job carries ``squeue``'s reason (``Resources``, ``Priority``, …). Some reasons never
clear by waiting (squeue(1), "JOB REASON CODES"): the job asks for more than the partition's
nodes have (``PartitionConfig``), for more nodes or time than it allows, or an account or QOS
it cannot use. :data:`NEVER_STARTS` maps each to the option to change; such a job is shown
``pending`` with that message as its error, and ``arena run --wait`` cancels it and fails the
run (:func:`fail_never_starting`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from arena.launch.base import Submission
from arena.outputs import layout
from arena.outputs.layout import MANIFEST_FILE, RUN_RESULT_FILE, STATUS_FILE
from arena.outputs.records import FINAL_STATES, LIVE_STATES, StatusWriter, read_json, write_json_atomic, write_run_result

from arena_slurm import scheduler

#: squeue states of a job that has not started its script yet.
QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SUSPENDED", "STOPPED"}

_RESOURCES = "lower launch.slurm.cpus, gpus or memory (and the ServerTask's resources), or choose another launch.slurm.partition"
_QOS_LIMIT = "ask for less (launch.slurm.cpus, gpus, memory, nodes, time) or use another launch.slurm.qos"
_ASSOC_LIMIT = "ask for less (launch.slurm.cpus, gpus, memory, nodes, time) or use another launch.slurm.account"
#: Pending reasons waiting cannot clear, and what to change (squeue(1), JOB REASON CODES).
NEVER_STARTS: dict[str, str] = {
    "PartitionConfig": f"the job asks for more than a node of its partition has: {_RESOURCES}",
    "PartitionNodeLimit": "the job asks for more nodes than its partition allows: lower launch.slurm.nodes or choose another launch.slurm.partition",
    "PartitionTimeLimit": "launch.slurm.time is longer than the partition's time limit: lower it or choose another launch.slurm.partition",
    "BadConstraints": f"no node satisfies the job's constraints: check launch.slurm.extra_sbatch (--constraint) and the request; {_RESOURCES}",
    "InvalidAccount": "the account does not exist or cannot use the partition: fix launch.slurm.account",
    "AccountNotAllowed": "the account may not use this partition: fix launch.slurm.account or launch.slurm.partition",
    "InvalidQOS": "the QOS does not exist or the account cannot use it: fix launch.slurm.qos",
    "QOSMaxCpuPerJobLimit": f"the QOS's per-job CPU limit is below the request: {_QOS_LIMIT}",
    "QOSMaxGRESPerJob": f"the QOS's per-job GPU limit is below the request: {_QOS_LIMIT}",
    "QOSMaxMemoryPerJob": f"the QOS's per-job memory limit is below the request: {_QOS_LIMIT}",
    "QOSMaxNodePerJobLimit": f"the QOS's per-job node limit is below the request: {_QOS_LIMIT}",
    "QOSMaxWallDurationPerJobLimit": f"launch.slurm.time exceeds the QOS's limit: {_QOS_LIMIT}",
    "AssocMaxCpuPerJobLimit": f"the account's per-job CPU limit is below the request: {_ASSOC_LIMIT}",
    "AssocMaxGRESPerJob": f"the account's per-job GPU limit is below the request: {_ASSOC_LIMIT}",
    "AssocMaxNodePerJobLimit": f"the account's per-job node limit is below the request: {_ASSOC_LIMIT}",
    "AssocMaxWallDurationPerJobLimit": f"launch.slurm.time exceeds the account's limit: {_ASSOC_LIMIT}",
    "DependencyNeverSatisfied": "a job it depends on failed",
}


#: How a job ended without its own final state, for the states that name their cause.
ENDINGS = {
    "TIMEOUT": "reached its time limit (launch.slurm.time) before the run finished; `arena run --resume` continues it",
    "OUT_OF_MEMORY": "ran out of memory: raise launch.slurm.memory (the runner) or the ServerTask's resources.memory",
    "NODE_FAIL": "lost its node (NODE_FAIL); `arena run --resume` continues it",
    "PREEMPTED": "was preempted; `arena run --resume` continues it",
}


#: What to change when sbatch refuses a job, by a fragment of its message (Slurm's
#: src/common/slurm_errno.c texts, e.g. "Memory required by task is not available").
REFUSALS: tuple[tuple[str, str], ...] = (
    ("memory", "lower launch.slurm.memory (the runner) or the ServerTask's resources.memory"),
    ("node configuration is not available", _RESOURCES),
    ("more processors than", _RESOURCES),
    ("invalid account", "fix launch.slurm.account"),
    ("invalid partition", "fix launch.slurm.partition"),
    ("invalid qos", "fix launch.slurm.qos"),
    ("time limit", "lower launch.slurm.time or choose another launch.slurm.partition"),
)


def refusal(run: str, message: str) -> str:
    """The error of a run whose job sbatch refused: sbatch's ``message`` and the option to change."""
    folded = message.casefold()
    hint = next((why for fragment, why in REFUSALS if fragment in folded), None)
    return f"run {run} was not submitted: {message}" + (f" ({hint})" if hint else "")


def never_starts(job: str, reason: str) -> str | None:
    """The error of a job pending for a reason waiting cannot clear (``None`` otherwise)."""
    why = NEVER_STARTS.get(reason)
    return f"Slurm will never start job {job} (pending: {reason}): {why}" if why else None


class PieceState(NamedTuple):
    """A job's run state, its error, and the reason Slurm gives while it is pending."""

    state: str
    error: str | None = None
    pending_reason: str | None = None


@dataclass(frozen=True)
class Piece:
    """One Slurm job of a run: the whole run, or shard ``shard`` of ``shards`` (an array element)."""

    run: str
    shard: int | None
    shards: int
    job: str
    #: the first run of the server group whose job this is (its folder holds the job's log); None: this run's own
    lead: str | None = None

    def work_dir(self, output_dir: Path) -> Path:
        return layout.work_dir(output_dir, self.run, self.shard)

    def log_name(self) -> str:
        return f"slurm-{self.job}.log" + (f" in run {self.lead}'s folder" if self.lead and self.lead != self.run else "")


def pieces(submission: Submission) -> list[Piece]:
    """Every job of the submission, in run order, shards in index order."""
    shards: dict[str, int] = submission.extra.get("shards", {})
    job_of: dict[str, str] = submission.extra.get("job_of", {})  # a server group's runs share its first run's job
    found = []
    for run, ids in submission.ids.items():
        n = int(shards.get(run, 1))
        for key in sorted(ids, key=int):
            found.append(Piece(run=run, shard=int(key) if n > 1 else None, shards=n, job=ids[key], lead=job_of.get(run)))
    return found


def piece_state(
    piece: Piece,
    output_dir: Path,
    live: dict[str, scheduler.QueuedJob] | None,
    accounting: dict[str, str] | None,
    cancel_requested: bool,
) -> PieceState:
    """The state of one job (see the module docstring for the rules)."""
    status = read_json(piece.work_dir(output_dir) / STATUS_FILE)
    status = status if isinstance(status, dict) else {}
    state = status.get("state")
    if state in FINAL_STATES:
        if state == "cancelled" and not cancel_requested and (accounting or {}).get(piece.job) in ENDINGS:
            # the runner saw only the SIGTERM of Slurm's time limit (or node failure): Slurm knows why
            final = (accounting or {})[piece.job]
            return PieceState("failed", f"Slurm job {piece.job} {ENDINGS[final]} (see {piece.log_name()})")
        return PieceState(state, status.get("error"))
    if live is None:  # squeue unavailable (e.g. the output directory was copied off the cluster)
        return PieceState(state if state in LIVE_STATES else "pending")
    job = live.get(piece.job)
    if job is not None:
        if job.state in QUEUED:
            reason = job.reason or job.state
            return PieceState("pending", never_starts(piece.job, job.reason), reason)
        return PieceState(state if state in ("starting_server", "running") else "running")
    final = (accounting or {}).get(piece.job)
    if final == "CANCELLED" or (final is None and cancel_requested):
        return PieceState("cancelled", "cancelled (arena cancel / scancel) before the run finished")
    if final in ENDINGS:
        return PieceState("failed", f"Slurm job {piece.job} {ENDINGS[final]} (see {piece.log_name()})")
    if final:
        return PieceState("failed", f"Slurm job {piece.job} ended {final} without a final state (see {piece.log_name()})")
    return PieceState("failed", (
        f"Slurm job {piece.job} is no longer queued and left no final state "
        f"(killed, or its node failed; see {piece.log_name()})"
    ))


def job_states(
    submission: Submission, *, require_squeue: bool = False
) -> tuple[dict[Piece, PieceState], dict[str, scheduler.QueuedJob] | None]:
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
        live: dict[str, scheduler.QueuedJob] | None = scheduler.squeue(refs)
    except LaunchError:
        if require_squeue:
            raise
        live = None
    ended = [p.job for p in all_pieces if live is not None and p.job not in live]
    accounting = None
    cancel_requested = bool(submission.extra.get("cancel_requested_at"))
    if ended and _needs_accounting(all_pieces, output_dir, live or {}, cancel_requested):
        accounting = scheduler.sacct(ended)
        if accounting is None:  # no accounting: slurmctld remembers ended jobs for MinJobAge
            unfinished = [p.job for p in all_pieces if p.job in ended and not _final_status(p, output_dir, cancel_requested)]
            accounting = scheduler.scontrol_states(unfinished)
    states = {p: piece_state(p, output_dir, live, accounting, cancel_requested) for p in all_pieces}
    return states, live


def _final_status(piece: Piece, output_dir: Path, cancel_requested: bool = True) -> bool:
    """Whether the job's status.json holds a final state Slurm need not be asked about: not a
    ``cancelled`` nobody asked for (a time limit's SIGTERM reads so to the runner)."""
    status = read_json(piece.work_dir(output_dir) / STATUS_FILE)
    state = status.get("state") if isinstance(status, dict) else None
    return state in FINAL_STATES and (state != "cancelled" or cancel_requested)


def _needs_accounting(
    all_pieces: list[Piece], output_dir: Path, live: dict[str, scheduler.QueuedJob], cancel_requested: bool
) -> bool:
    """Ask sacct only for ended jobs without a settled status.json (the usual case needs none)."""
    return any(piece.job not in live and not _final_status(piece, output_dir, cancel_requested) for piece in all_pieces)


def fail_never_starting(submission: Submission, states: dict[Piece, PieceState]) -> list[Piece]:
    """Cancel every job pending for a reason that cannot clear and fail its run with that
    reason (the job never started, so nothing else writes its status). Returns those pieces.

    Raises:
        LaunchError: scancel failed.
    """
    doomed = {p: st for p, st in states.items() if st.state == "pending" and st.error}
    if not doomed:
        return []
    output_dir = Path(submission.output_dir)
    for piece, st in doomed.items():
        work_dir = piece.work_dir(output_dir)
        old = read_json(work_dir / STATUS_FILE)
        fields = {k: v for k, v in (old if isinstance(old, dict) else {}).items() if k not in ("state", "error")}
        StatusWriter(work_dir / STATUS_FILE, **fields).write(state="failed", error=st.error)
    scheduler.scancel([p.job for p in doomed], elements=True)
    finalize(submission, {p: PieceState("failed", st.error) for p, st in doomed.items()})
    return list(doomed)


def finalize(submission: Submission, states: dict[Piece, PieceState]) -> list[Piece]:
    """Write the final status.json and run_result.json of every ended job that lacks them.

    A job that failed before its runner wrote a result (server never ready, killed, never
    started) gets a ``failed`` or ``cancelled`` result keeping whatever records it wrote, so
    the report shows it as failed, not missing. Returns the pieces it wrote.
    """
    output_dir = Path(submission.output_dir)
    manifest = read_json(output_dir / MANIFEST_FILE) or {}
    written = []
    for piece, (state, error, _) in states.items():
        if state not in FINAL_STATES:
            continue
        work_dir = piece.work_dir(output_dir)
        status = read_json(work_dir / STATUS_FILE)
        status = status if isinstance(status, dict) else {}
        result = read_json(work_dir / RUN_RESULT_FILE)
        if isinstance(result, dict) and result.get("state") in FINAL_STATES:
            if result["state"] == "cancelled" and state == "failed":  # Slurm's TIMEOUT, not a cancel
                fields = {k: v for k, v in status.items() if k not in ("state", "error")}
                StatusWriter(work_dir / STATUS_FILE, **fields).write(state=state, error=error)
                write_json_atomic(work_dir / RUN_RESULT_FILE, {**result, "state": state, "error": error})
                written.append(piece)
            continue
        work_dir.mkdir(parents=True, exist_ok=True)
        if status.get("state") not in FINAL_STATES:
            fields = {k: v for k, v in status.items() if k not in ("state", "error")}
            StatusWriter(work_dir / STATUS_FILE, **fields).write(state=state, error=error)
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
