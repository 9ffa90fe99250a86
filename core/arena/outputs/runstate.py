"""A run's state as its launcher writes it: the live ``status.json`` fields and, when the
runner could not, the final state (``status.json`` and ``run_result.json``).

``arena run-one`` keeps its own status current while it works (:class:`StatusWriter`). Around
it, whoever launches it — the local backend's scheduler, the node supervisor of a Slurm job or
an OSMO task (:mod:`arena.launch.node`), a backend that finds a job gone — writes the states
the runner cannot: ``pending``, ``starting_server``, and a final state for a runner that never
started or died without writing one (:func:`finish_after_runner`: the records decide first).
They all go through these functions, so the file's name, its atomic rewrite, its fields and
the rule for a runner that ended without a final state are written in one place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arena.outputs.layout import STATUS_FILE, work_dir
from arena.outputs.records import FINAL_STATES, StatusWriter, read_json, write_run_result

__all__ = ["final_state", "finish_after_runner", "finish_unfinished", "update_status"]


def update_status(work_dir: str | os.PathLike[str], state: str, **fields: Any) -> dict[str, Any]:
    """Merge ``state`` and ``fields`` into ``<work_dir>/status.json`` (created with its parent
    when missing; an unreadable one is replaced) and return what it now holds.

    Raises:
        ValueError: ``state`` is not a run state (:data:`arena.outputs.records.RUN_STATES`).
        OSError: the directory cannot be written.
    """
    path = Path(work_dir) / STATUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    current = read_json(path)
    current = current if isinstance(current, dict) else {}
    current.update(state=state, **fields)
    return StatusWriter(path).write(**current)


def final_state(work_dir: str | os.PathLike[str]) -> str | None:
    """The final state ``<work_dir>/status.json`` holds (``completed``, ``failed``,
    ``cancelled``), or ``None`` while it holds none (or cannot be read)."""
    status = read_json(Path(work_dir) / STATUS_FILE)
    state = status.get("state") if isinstance(status, dict) else None
    return state if state in FINAL_STATES else None


def finish_unfinished(
    work_dir: str | os.PathLike[str],
    *,
    run: str,
    state: str,
    error: str,
    shard: Sequence[int] | None = None,
    server: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """When ``<work_dir>`` holds no final state yet: write ``state`` with ``error`` to its
    ``status.json`` (with ``fields``) and its ``run_result.json`` (keeping the episodes already
    recorded). Returns whether it wrote them; a runner's own final state is never replaced.

    Raises:
        ValueError: ``state`` is not a final state.
    """
    if state not in FINAL_STATES:
        raise ValueError(f"{state!r} is not a final state ({', '.join(FINAL_STATES)})")
    if final_state(work_dir) is not None:
        return False
    update_status(work_dir, state, error=error, **fields)
    write_run_result(work_dir, run=run, state=state, error=error, server=server, shard=shard)
    return True


def finish_after_runner(
    output_dir: str | os.PathLike[str], run: str, *, state: str, error: str, runner_started: bool = True, **fields: Any
) -> str | None:
    """The final state of a run (or of shard ``fields["shard"]``, ``(K, N)``) whose runner has
    ended, or never started, written when the runner did not write one: ``completed`` when the
    runner had started and every work item of the (unsharded) run is recorded
    (:func:`arena.outputs.completion.complete_recorded_run`: the records decide), else ``state``
    with ``error`` and ``fields`` (``shard``, ``server`` and status fields:
    :func:`finish_unfinished`). Returns the state written, ``None`` when the runner's own final
    state stands.

    Raises:
        ValueError: ``state`` is not a final state.
        OSError: the files cannot be written.
    """
    shard = fields.get("shard")
    directory = work_dir(output_dir, run, shard[0] if shard else None)
    if final_state(directory) is not None:
        return None
    if runner_started and not shard:
        from arena.outputs.completion import complete_recorded_run

        if complete_recorded_run(output_dir, run) is not None:
            return "completed"
    return state if finish_unfinished(directory, run=run, state=state, error=error, **fields) else None
