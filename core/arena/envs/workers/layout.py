"""Which envs run in which worker process, and under which interpreter.

:func:`plan_workers` turns an environment config's ``workers`` and ``python`` keys, the run's
``num_envs`` and the class's declarations (:attr:`Environment.envs_per_worker`,
:attr:`Environment.default_venv`) into a :class:`WorkerPlan`. The config loader calls it, so
an impossible combination fails at ``arena validate`` (exit 2), before anything starts.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from arena.envs.base import Environment, EnvironmentConfig


@dataclass(frozen=True)
class WorkerPlan:
    """``slices``: the env ids of each worker, contiguous and in order (empty: in-process);
    ``python``: the workers' interpreter (``None`` in-process)."""

    slices: tuple[tuple[int, ...], ...]
    python: str | None

    @property
    def in_process(self) -> bool:
        return not self.slices

    def describe(self) -> str:
        """E.g. ``3 workers (envs 0-1, 2-3, 4) under /usr/bin/python3``, or ``in-process``."""
        if self.in_process:
            return "in-process"
        spans = ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else f"{s[0]}" for s in self.slices)
        count = len(self.slices)
        return f"{count} worker{'s' if count > 1 else ''} (envs {spans}) under {self.python}"


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def worker_python(env_cls: type[Environment], config: EnvironmentConfig) -> str | None:
    """The interpreter the config asks for: ``python``, else the class's ``default_venv`` when
    that venv exists; ``None`` when neither applies."""
    if config.python:
        return str(os.path.expanduser(config.python))
    venv = getattr(env_cls, "default_venv", None)
    if venv:
        from arena.venvs import venv_python

        candidate = venv_python(venv)
        if candidate.exists():
            return str(candidate)
    return None


def plan_workers(env_cls: type[Environment], config: EnvironmentConfig, num_envs: int) -> WorkerPlan:
    """Spread ``num_envs`` envs of ``env_cls`` over worker processes as ``config`` asks.

    ``workers: 0`` is in-process, ``N`` at most ``min(N, num_envs)`` workers, ``auto`` one per
    usable core (at most ``num_envs``). A ``python`` (or an existing default venv) means at
    least one worker. ``envs_per_worker = "all"`` caps the count at one worker;
    ``"one"`` makes it ``num_envs`` whenever ``num_envs > 1``. Envs are dealt in contiguous
    slices whose sizes differ by at most one.

    Raises:
        ValueError: the class cannot be split as asked (``workers`` above 1 for an ``"all"``
            environment, or between 1 and ``num_envs`` for a ``"one"`` environment).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    asked = config.workers
    split = getattr(env_cls, "envs_per_worker", "any")
    name = getattr(env_cls, "name", "") or env_cls.__name__
    count = min(num_envs, usable_cores()) if asked == "auto" else min(int(asked), num_envs)
    python = worker_python(env_cls, config)
    if python is not None:
        count = max(count, 1)
    if split == "all":
        if asked != "auto" and int(asked) > 1:
            raise ValueError(
                f"environment '{name}' runs all its envs in one worker process (it vectorizes "
                f"itself): workers must be 0, 1 or auto, not {asked}"
            )
        count = min(count, 1)
    elif split == "one" and num_envs > 1:
        if asked != "auto" and 0 < int(asked) < num_envs:
            raise ValueError(
                f"environment '{name}' runs one env per worker process: workers must be 0 or auto "
                f"(both mean num_envs = {num_envs} workers here), or at least num_envs, not {asked}"
            )
        count = num_envs
    if count == 0:
        return WorkerPlan(slices=(), python=None)
    base, extra = divmod(num_envs, count)
    slices, start = [], 0
    for k in range(count):
        size = base + (1 if k < extra else 0)
        slices.append(tuple(range(start, start + size)))
        start += size
    return WorkerPlan(slices=tuple(slices), python=python or sys.executable)
