"""Loading a run's episodes into the work queue before its runners start.

A backend whose runners claim episodes (``arena run-one --queue``; the local and Ray backends
by default) calls :func:`load_runs` once per submission, before any runner of those runs
starts: a fresh run queues all its work items, a resumed one those
:class:`arena.launch.base.Resume` says are left. The queue is
:class:`arena.outputs.workqueue.WorkQueue` in ``<output_dir>/queue.sqlite``.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from arena.outputs.layout import QUEUE_FILE
from arena.outputs.workqueue import WorkQueue
from arena.rollout.workitems import plan_work_items

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.base import Resume

__all__ = ["load_runs"]


def load_runs(output_dir: Path, experiment: ResolvedExperiment, runs: Iterable[str],
              resume: Resume | None = None) -> WorkQueue:
    """Queue the work items of ``runs`` (of ``experiment``) in ``output_dir``'s work queue
    (``resume``: only the items it lists as left); returns the queue.

    Raises:
        OSError: the queue file cannot be created or written (a read-only or full output folder).
    """
    path = Path(output_dir) / QUEUE_FILE
    try:
        try:
            WorkQueue(path).counts()
        except sqlite3.DatabaseError as exc:  # damaged (an OS crash while it was written): rebuilt from the records
            if isinstance(exc, sqlite3.OperationalError):
                raise
            path.unlink()
        queue = WorkQueue(path)
        for name in runs:
            items = plan_work_items(experiment.runs[name])
            if resume is not None:
                left = set(resume.remaining.get(name, []))
                items = [item for item in items if item.episode_index in left]
            queue.load(name, [(item.episode_index, item.seed) for item in items])
    except sqlite3.Error as exc:  # a read-only or full output folder: reported as the others are
        raise OSError(errno.EIO, f"cannot write the work queue: {exc}", str(path)) from exc
    return queue
