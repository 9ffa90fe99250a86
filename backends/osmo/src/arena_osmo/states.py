"""OSMO workflow and task states, mapped onto arena's run states.

OSMO (user guide ``workflows/lifecycle``; service enum of task/group states): a task is
SUBMITTING, WAITING, PROCESSING, SCHEDULING, INITIALIZING, RUNNING, RESCHEDULED, COMPLETED or
one of the FAILED* states (FAILED, FAILED_CANCELED, FAILED_UPSTREAM, FAILED_IMAGE_PULL,
FAILED_EXEC_TIMEOUT, FAILED_QUEUE_TIMEOUT, FAILED_EVICTED, FAILED_PREEMPTED, ...). A workflow
is PENDING, WAITING, RUNNING, COMPLETED or FAILED*.

arena (ARCHITECTURE section 4): ``pending``, ``starting_server``, ``running``, ``completed``,
``failed``, ``cancelled``. The runner task's exit code says more than COMPLETED does, because
run-one's codes 0-3 all COMPLETE the task: 0 completed, anything else failed (run-one exits 3
when the run aborted or an episode ended in ``error``; ``arena collect`` brings the details).
The raw OSMO strings are kept next to the mapped state. A queued runner's OSMO phase is its
``pending_reason`` (SCHEDULING: waiting for nodes with the requested resources); requests no
node of the pool can meet are refused by OSMO at submission and by arena's placement check
before it, and a group that waits longer than ``launch.osmo.queue_timeout`` ends
FAILED_QUEUE_TIMEOUT, reported naming that option. A runner killed by a signal (exit 137:
SIGKILL, typically out of memory) is reported with the signal's usual cause.
"""

from __future__ import annotations

from typing import Any

QUEUED = frozenset({"PENDING", "SUBMITTING", "WAITING", "PROCESSING", "SCHEDULING", "INITIALIZING", "RESCHEDULED"})
CANCELLED = frozenset({"FAILED_CANCELED"})
#: What a queued task is waiting for (OSMO user guide, workflows/lifecycle).
PENDING_REASONS = {
    "PENDING": "submitted, not yet processed",
    "SUBMITTING": "being validated by the OSMO service",
    "WAITING": "waiting for upstream tasks",
    "PROCESSING": "being handed to the cluster's scheduler",
    "SCHEDULING": "waiting for a node with the requested resources",
    "INITIALIZING": "pulling its image and starting",
    "RESCHEDULED": "rescheduled after a preemption",
}
#: FAILED* states whose cause is an option the user sets.
OPTION_CAUSES = {
    "FAILED_QUEUE_TIMEOUT": "it waited for resources longer than launch.osmo.queue_timeout (raise it, or ask for less)",
    "FAILED_EXEC_TIMEOUT": "it ran longer than launch.osmo.exec_timeout (raise it; `arena run --resume` continues the run)",
    "FAILED_IMAGE_PULL": "its image could not be pulled: check launch.osmo.runner_image and the registry credentials",
    "FAILED_EVICTED": "it was evicted (memory or disk over its request: raise launch.osmo.runner.memory_gb or storage_gb)",
}
#: Exit codes of a process killed by a signal (128 + signal number) and their usual causes.
SIGNAL_EXITS = {
    137: "SIGKILL: typically out of memory (raise launch.osmo.runner.memory_gb)",
    139: "SIGSEGV: the simulator or a library crashed",
    143: "SIGTERM: stopped from outside",
}


def exit_reason(code: Any) -> str:
    """``exit code N`` with the usual cause of a signal exit."""
    cause = SIGNAL_EXITS.get(code) if isinstance(code, int) else None
    return f"exit code {code}" + (f" ({cause})" if cause else "")


def workflow_finished(status: str) -> bool:
    """Whether a workflow status is final (COMPLETED or any FAILED*)."""
    return status == "COMPLETED" or status.startswith("FAILED")


def tasks_by_name(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every task of an ``osmo workflow query`` answer, by name."""
    return {t["name"]: t for g in workflow.get("groups") or [] for t in g.get("tasks") or [] if "name" in t}


def run_state(
    workflow: dict[str, Any], runner: str, server: str | None
) -> tuple[str, str | None, dict[str, Any]]:
    """``(arena state, error, raw)`` of one run from its workflow's query answer."""
    tasks = tasks_by_name(workflow)
    wf_status = str(workflow.get("status", ""))
    task = tasks.get(runner)
    raw: dict[str, Any] = {"workflow": workflow.get("name"), "workflow_status": wf_status, "task": runner}
    if server:
        raw["server_task"] = server
        raw["server_status"] = (tasks.get(server) or {}).get("status")
    if task is None:
        if wf_status in CANCELLED:
            return "cancelled", "the OSMO workflow was cancelled", raw
        if wf_status.startswith("FAILED"):
            return "failed", f"the OSMO workflow ended {wf_status} before this run's task existed", raw
        return "pending", None, raw
    status = str(task.get("status", ""))
    code = task.get("exit_code")
    raw.update(task_status=status, exit_code=code)
    message = task.get("failure_message")
    if status in QUEUED:
        reason = PENDING_REASONS.get(status, status)
        raw["pending_reason"] = f"OSMO {status}: {reason}" + (f"; {message}" if message else "")
        return "pending", None, raw
    if status == "RUNNING":
        if server and raw.get("server_status") in QUEUED:
            return "starting_server", None, raw
        return "running", None, raw
    if status == "COMPLETED":
        if code in (None, 0):
            return "completed", None, raw
        if code == 2:
            return "failed", "arena run-one refused the run's configuration (exit 2); see runner.log", raw
        return "failed", f"arena run-one exited {code}: the run aborted or had error episodes; `arena collect` fetches its records", raw
    if status in CANCELLED:
        return "cancelled", message or "cancelled on OSMO", raw
    if status.startswith("FAILED"):
        why = [message] if message else []
        if code is not None:
            why.append(exit_reason(code))
        if status in OPTION_CAUSES:
            why.append(OPTION_CAUSES[status])
        return "failed", f"OSMO task {runner} {status}" + (f": {'; '.join(why)}" if why else ""), raw
    return "pending", f"unrecognized OSMO task status {status!r}", raw
