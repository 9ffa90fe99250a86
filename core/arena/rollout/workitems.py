"""Work items: the episodes a run owes, planned before anything starts.

A work item is ``(run, episode_index)``; episode ``i`` resets its env with seed
``environment_builder.seed + i``. Envs of a vectorized run take items from a queue, so totals
never depend on ``num_envs``, on which env finished first, on the backend or on a resume.
Shard ``K`` of ``N`` holds the items whose ``episode_index % N == K``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from arena.outputs.layout import MANIFEST_FILE
from arena.outputs.records import FORMAT_VERSION, utc_now, write_json_atomic


@dataclass(frozen=True, order=True)
class WorkItem:
    """One episode of one run: ``episode_index`` (0-based) and its reset ``seed``."""

    run: str
    episode_index: int
    seed: int


def plan_work_items(run: Any) -> list[WorkItem]:
    """All work items of a resolved run, in episode order.

    ``run`` is a :class:`arena.config.ResolvedRun` (``name``,
    ``environment_builder.seed``, ``rollout_limit.num_episodes``).
    """
    base = int(run.environment_builder.seed)
    return [WorkItem(run.name, i, base + i) for i in range(int(run.rollout_limit.num_episodes))]


def select_shard(items: Iterable[WorkItem], k: int, n: int) -> list[WorkItem]:
    """The items of shard ``k`` of ``n``: those whose ``episode_index % n == k``.

    Raises:
        ValueError: not ``0 <= k < n``.
    """
    if n < 1 or not 0 <= k < n:
        raise ValueError(f"shard {k}/{n}: need 0 <= K < N")
    return [item for item in items if item.episode_index % n == k]


def parse_shard(text: str) -> tuple[int, int]:
    """Parse ``"K/N"`` (as in ``--shard 1/4``) into ``(K, N)``.

    Raises:
        ValueError: not two integers with ``0 <= K < N``.
    """
    try:
        k_text, n_text = text.split("/")
        k, n = int(k_text), int(n_text)
    except ValueError:
        raise ValueError(f"shard {text!r}: expected K/N, e.g. 0/4") from None
    select_shard((), k, n)
    return k, n


def manifest_entry(run: Any) -> dict[str, Any]:
    """The manifest's description of one resolved run."""
    from arena.outputs.metrics import declared_bounds

    try:
        bounds = declared_bounds(run.environment_cls, run.environment)
    except Exception:  # a malformed declaration: the metrics keep Student's t (run-one says why)
        bounds = {}
    return {
        "task": run.environment.task_name(),
        "environment": run.environment_type,
        "policy": {"type": run.policy_type, "variant": run.policy.variant()},
        "num_envs": int(run.environment_builder.num_envs),
        "seed": int(run.environment_builder.seed),
        "num_episodes": int(run.rollout_limit.num_episodes),
        "work_items": [asdict(item) for item in plan_work_items(run)],
        "metric_bounds": {key: list(pair) for key, pair in bounds.items()} or None,
        "reported_as": _reported_as(getattr(run, "environment_cls", None)),
        "control_hz": _control_hz(run),
    }


def _control_hz(run: Any) -> float | None:
    """The environment's control steps per second for this run's config
    (``Environment.control_hz_for``), so a delay in steps also reads in ms; ``None`` unknown."""
    try:
        hz = run.environment_cls.control_hz_for(run.environment)
    except Exception:  # not declared, or a stand-in run
        return None
    return float(hz) if isinstance(hz, (int, float)) and hz > 0 else None


def _reported_as(env_cls: Any) -> dict[str, Any] | None:
    """``{"by": TOOL, "names": {its name: arena's figure}}`` as the environment class declares
    (``Environment.reported_as``), or ``None``."""
    names = getattr(env_cls, "reported_as", None)
    if not isinstance(names, dict) or not names:
        return None
    return {"by": getattr(env_cls, "reported_by", None), "names": {str(k): str(v) for k, v in names.items()}}


def write_manifest(experiment: Any, output_dir: str | os.PathLike[str]) -> Path:
    """Write ``<output_dir>/manifest.json`` listing every run's work items; returns its path.

    Layout: ``{"format_version", "experiment", "created_at", "runs": {NAME: {"task",
    "environment", "policy": {"type", "variant"}, "num_envs", "seed", "num_episodes",
    "work_items": [{"run", "episode_index", "seed"}, ...], "metric_bounds": {KEY: [low, high]}
    | null (the environment's declared episode-metric bounds), "reported_as": {"by", "names":
    {NAME: FIGURE}} | null (the names a reference tool reports the run's figures under),
    "control_hz": float | null (the environment's control steps per second)}}}``.
    """
    data = {
        "format_version": FORMAT_VERSION,
        "experiment": experiment.name,
        "created_at": utc_now(),
        "runs": {name: manifest_entry(run) for name, run in experiment.runs.items()},
    }
    return write_json_atomic(Path(output_dir) / MANIFEST_FILE, data)
