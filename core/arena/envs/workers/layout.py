"""Which envs run in which worker process, and under which interpreter.

:func:`plan_workers` turns an environment config's ``workers`` and ``python`` keys, the run's
``num_envs`` and the class's declarations (:attr:`Environment.envs_per_worker`,
:attr:`Environment.default_venv`, or :meth:`Environment.default_venv_for` when it depends on
the config) into a :class:`WorkerPlan`. The config loader makes the plan
once per run and keeps it on the resolved run (``ResolvedRun.worker_plan``), so an impossible
combination fails at ``arena validate`` (exit 2), before anything starts, and ``arena run-one``
builds the environment from that plan (:func:`arena.envs.workers.build_environment`).

The plan is a function of the run's config alone: it never looks at the disk, so validating on
a login node and running on a compute node plan the same split. What belongs to the machine
that starts the workers is looked up there: the interpreter of a declared benchmark venv, by
its name (:meth:`WorkerPlan.resolved`, :func:`arena.venvs.venv_python`: the venvs may live
elsewhere on each machine), and, for ``workers: auto``, the usable cores (counted by
:func:`plan_workers` in the process that loads the run, i.e. where it runs; ``auto`` never
makes a split invalid).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace

from arena.envs.base import Environment, EnvironmentConfig


@dataclass(frozen=True)
class WorkerPlan:
    """How a run's envs spread over worker processes.

    ``slices``: the env ids of each worker, contiguous and in order (empty: in-process).
    ``python``: the workers' interpreter, an ``environment.python`` path; ``None`` until
    :meth:`resolved` when the config names none. ``venv``: the benchmark venv (the name of the
    class's ``default_venv``) whose interpreter runs the workers when ``python`` is unset.
    """

    slices: tuple[tuple[int, ...], ...]
    python: str | None
    venv: str | None = None

    @property
    def in_process(self) -> bool:
        return not self.slices

    def interpreter(self) -> str:
        """The workers' interpreter on this machine: ``python``, else the venv's interpreter
        when that venv exists here, else this interpreter (the simulator may be installed in
        it; if not, the workers say so when they build the envs)."""
        if self.python:
            return self.python
        if self.venv:
            from arena.venvs import venv_python

            candidate = venv_python(self.venv)
            if candidate.exists():
                return str(candidate)
        return sys.executable

    def resolved(self) -> WorkerPlan:
        """This plan with ``python`` set to :meth:`interpreter` (in-process plans unchanged)."""
        if self.in_process or self.python:
            return self
        return replace(self, python=self.interpreter())

    def describe(self) -> str:
        """E.g. ``3 workers (envs 0-1, 2-3, 4) under /usr/bin/python3``, or ``in-process``; a
        declared venv missing on this machine is named."""
        if self.in_process:
            return "in-process"
        spans = ", ".join(f"{s[0]}-{s[-1]}" if len(s) > 1 else f"{s[0]}" for s in self.slices)
        count = len(self.slices)
        where = self.python or (f"the {self.venv} venv" if self.venv else "this interpreter")
        text = f"{count} worker{'s' if count > 1 else ''} (envs {spans}) under {where}"
        if self.venv and self.python == sys.executable:
            from arena.venvs import venv_dir

            if not venv_dir(self.venv).exists():
                text += f" (the {self.venv} venv does not exist at {venv_dir(self.venv)})"
        return text


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def worker_python(env_cls: type[Environment], config: EnvironmentConfig) -> str | None:
    """The interpreter the config asks for on this machine: ``python``, else the interpreter of
    the class's declared venv when that venv exists here; ``None`` when neither applies (what
    ``arena validate`` warns about; planning never asks the disk)."""
    if config.python:
        return str(os.path.expanduser(config.python))
    venv = declared_venv_name(env_cls, config)
    if venv:
        from arena.venvs import venv_python

        candidate = venv_python(venv)
        if candidate.exists():
            return str(candidate)
    return None


def declared_venv_name(env_cls: type[Environment], config: EnvironmentConfig | None = None) -> str | None:
    """The name of the benchmark venv whose interpreter runs the class's workers, or ``None``:
    with ``config``, the class's answer for it (:meth:`Environment.default_venv_for`: a
    :class:`arena.venvs.VenvSpec` or a venv's name); without, its ``default_venv``.

    Raises:
        ValueError: ``default_venv`` is not an :class:`arena.venvs.VenvSpec` (a plain name, as
            plugins wrote it before venvs were declared, says how to declare it), or
            ``default_venv_for`` answered something other than a spec, a name or ``None``.
    """
    from arena.venvs import VenvError, VenvSpec, declared_venv

    decide = getattr(env_cls, "default_venv_for", None)
    chosen = decide(config) if config is not None and callable(decide) else getattr(env_cls, "default_venv", None)
    if chosen is not getattr(env_cls, "default_venv", None):  # a per-config answer: a spec or a name
        if chosen is None or isinstance(chosen, str):
            return chosen or None
        if isinstance(chosen, VenvSpec):
            return chosen.name
        name = getattr(env_cls, "__qualname__", repr(env_cls))
        raise ValueError(f"{name}.default_venv_for must return an arena.venvs.VenvSpec, a venv name or None; got {chosen!r}")
    try:  # the class's own declaration, checked as one
        spec = declared_venv(env_cls)
    except VenvError as exc:
        raise ValueError(str(exc)) from None
    return spec.name if spec is not None else None


def plan_workers(env_cls: type[Environment], config: EnvironmentConfig, num_envs: int) -> WorkerPlan:
    """Spread ``num_envs`` envs of ``env_cls`` over worker processes as ``config`` asks.

    ``workers: 0`` is in-process, ``N`` at most ``min(N, num_envs)`` workers, ``auto`` one per
    usable core (at most ``num_envs``). A ``python``, or a venv the class declares, means at
    least one worker (whether that venv exists is looked up where the workers start:
    :meth:`WorkerPlan.resolved`). ``envs_per_worker = "all"`` caps the count at one worker;
    ``"one"`` makes it ``num_envs`` whenever ``num_envs > 1``. Envs are dealt in contiguous
    slices whose sizes differ by at most one.

    Raises:
        ValueError: the class cannot be split as asked (``workers`` above 1 for an ``"all"``
            environment, or between 1 and ``num_envs`` for a ``"one"`` environment).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    asked = config.workers
    name = getattr(env_cls, "name", "") or env_cls.__name__
    decide = getattr(env_cls, "envs_per_worker_for", None)  # the class's envs_per_worker, or per config
    split = decide(config) if callable(decide) else getattr(env_cls, "envs_per_worker", "any")
    if split not in ("any", "one", "all"):
        raise ValueError(f"environment '{name}' says its envs spread as {split!r}; expected any, one or all")
    count = min(num_envs, usable_cores()) if asked == "auto" else min(int(asked), num_envs)
    python = str(os.path.expanduser(config.python)) if config.python else None
    venv = None if python else declared_venv_name(env_cls, config)
    if python is not None or venv is not None:
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
    return WorkerPlan(slices=tuple(slices), python=python, venv=venv)
