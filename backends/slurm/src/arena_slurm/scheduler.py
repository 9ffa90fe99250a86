"""The Slurm command-line tools, shelled out to: ``sbatch``, ``squeue``, ``sacct``, ``scancel``.

No Python bindings (pyslurm must match the cluster's Slurm release). Facts relied on:
``sbatch --parsable`` prints ``jobid[;cluster]``; ``squeue -r`` lists each array element on
its own line (``123_4``), het-job components appear as ``123+0``, ``%r`` is the reason a job
waits (``Resources``, ``Priority``, ``PartitionConfig``, …, ``None`` while it runs); ``squeue -j`` with only
unknown ids fails with "Invalid job id specified"; ``sacct`` fails where accounting is
disabled ("Slurm accounting storage is disabled") and then only ``squeue`` and the jobs'
own ``status.json`` files tell what happened.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from arena.errors import LaunchError

TIMEOUT_S = 60.0


def _run(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise LaunchError(
            f"'{argv[0]}' not found: the slurm backend runs on a machine with the Slurm client tools "
            "(a login node); install slurm-client or load its module"
        ) from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"'{' '.join(argv[:2])} …' did not answer within {timeout_s:g} s: is slurmctld reachable?") from None


def available() -> bool:
    """Whether ``sbatch`` is on PATH."""
    return shutil.which("sbatch") is not None


def sbatch(script: Path, *args: str, script_args: Sequence[str] = ()) -> str:
    """Submit ``script`` with ``sbatch --parsable ARGS SCRIPT SCRIPT_ARGS``; return the job id.

    ``ARGS`` override the script's ``#SBATCH`` lines; ``SCRIPT_ARGS`` reach the batch script
    as its ``"$@"``.

    Raises:
        LaunchError: sbatch is missing or refused the job (its message is included).
    """
    result = _run(["sbatch", "--parsable", *args, str(script), *script_args])
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip()
        raise LaunchError(f"sbatch refused {script.name}: {message}")
    job_id = result.stdout.strip().splitlines()[-1].split(";")[0].strip() if result.stdout.strip() else ""
    if not job_id.isdigit():
        raise LaunchError(f"sbatch --parsable printed {result.stdout.strip()!r} for {script.name}, not a job id")
    return job_id


def base_id(job_ref: str) -> str:
    """``123`` of ``123``, ``123_4`` (array element) or ``123+1`` (het-job component)."""
    return job_ref.split("_")[0].split("+")[0]


def _key(job_id: str) -> str:
    return job_id.split("+")[0]


@dataclass(frozen=True)
class QueuedJob:
    """One live job as ``squeue`` shows it: its state and the reason it waits ("" when none)."""

    state: str
    reason: str = ""


def squeue(job_refs: Iterable[str]) -> dict[str, QueuedJob]:
    """Live jobs among ``job_refs``: ``{job or array element id: QueuedJob}``.

    Het-job components are folded into their job (the first component's line wins). Jobs
    that have left the queue are absent.

    Raises:
        LaunchError: squeue is missing or failed for another reason than unknown ids.
    """
    ids = sorted({base_id(ref) for ref in job_refs})
    if not ids:
        return {}
    result = _run(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(ids)])
    if result.returncode != 0:
        if "Invalid job id" in result.stderr:
            return {}
        raise LaunchError(f"squeue failed: {result.stderr.strip()}")
    jobs: dict[str, QueuedJob] = {}
    for line in result.stdout.splitlines():
        job, state, reason = (line.strip().split("|", 2) + ["", ""])[:3]
        if job:
            reason = reason.strip()
            jobs.setdefault(_key(job), QueuedJob(state.strip(), "" if reason in ("None", "(null)") else reason))
    return jobs


def jobs_by_comment(comments: set[str]) -> dict[str, str]:
    """``{comment: job id}`` of the live jobs (array jobs: their base id) whose ``--comment``
    is one of ``comments``; empty when squeue cannot be run."""
    try:
        result = _run(["squeue", "-h", "-o", "%F|%k"])
    except LaunchError:  # no squeue here (the directory copied off the cluster)
        return {}
    if result.returncode != 0:
        return {}
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        job, _, comment = line.strip().partition("|")
        if comment in comments and job.isdigit():
            found.setdefault(comment, job)
    return found


def sacct(job_refs: Iterable[str]) -> dict[str, str] | None:
    """Final states from accounting: ``{job or array element id: state}``; ``None`` where
    accounting is disabled or sacct is missing (then callers rely on squeue and status.json)."""
    ids = sorted({base_id(ref) for ref in job_refs})
    if not ids or shutil.which("sacct") is None:
        return None
    try:
        result = _run(["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(ids)])
    except LaunchError:
        return None
    if result.returncode != 0:
        return None
    states: dict[str, str] = {}
    for line in result.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job:
            # "CANCELLED by 0" -> "CANCELLED"
            states.setdefault(_key(job), state.split()[0] if state.strip() else "")
    return states


def scontrol_states(job_refs: Iterable[str]) -> dict[str, str]:
    """Final states ``scontrol show job`` still knows: ``{job or array element id: JobState}``.

    Without accounting this is the only record of how a job ended (``TIMEOUT``,
    ``OUT_OF_MEMORY``, ``NODE_FAIL``, ``CANCELLED``), and slurmctld keeps it only for
    ``MinJobAge`` seconds (300 by default) after the job ends. Unknown jobs are absent.
    """
    states: dict[str, str] = {}
    for ref in sorted(set(job_refs)):
        try:
            result = _run(["scontrol", "show", "job", "-o", ref.split("+")[0]])
        except LaunchError:
            return states
        if result.returncode != 0:
            continue
        for line in result.stdout.splitlines():
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            job = fields.get("JobId", "")
            array_job, task = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
            key = f"{array_job}_{task}" if array_job and task and task.isdigit() else job
            if key == ref.split("+")[0] and fields.get("JobState"):
                states[key] = fields["JobState"]
    return states


def scancel(job_refs: Iterable[str], *, elements: bool = False) -> None:
    """Cancel the jobs: whole arrays, or with ``elements`` only the array elements named
    (``123_4``). Ids that already ended are ignored.

    Raises:
        LaunchError: scancel is missing or failed for another reason.
    """
    ids = sorted({ref.split("+")[0] if elements else base_id(ref) for ref in job_refs})
    if not ids:
        return
    result = _run(["scancel", *ids])
    if result.returncode != 0 and "Invalid job id" not in result.stderr and "already completing" not in result.stderr:
        raise LaunchError(f"scancel failed: {result.stderr.strip()}")
