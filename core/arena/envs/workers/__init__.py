"""Environment workers: one vectorized ``Environment`` whose envs run in worker processes.

One mechanism serves three needs (docs/architecture.md, "Environment workers"): parallel
simulation on many-core nodes, benchmarks that need another interpreter (their own venv), and crash isolation.

- :func:`build_environment` builds what a run's ``environment`` config asks for: the class
  itself in this process (``workers: 0``, the default), or a :class:`WorkerEnvironment` that
  starts one worker process per slice of env ids (:func:`plan_workers`).
- A worker is ``PYTHON -m arena.envs.workers`` (a real subprocess under any interpreter that
  has arena-core and the environment's package): it imports the environment class by its
  import path, validates the config with the class's own ``Config`` and builds the class for
  its slice, then answers ``reset`` / ``step`` / ``render`` / ``episode_info`` / ``close``
  (:mod:`arena.envs.workers.protocol`).
- A worker that dies ends its envs' episodes as ``error`` (``info["env_errors"]``,
  :class:`arena.errors.SimulatorError`) and is started again before those envs get new
  episodes; the other envs go on. Workers run under :mod:`arena.keeper`, so they die with the
  process that started them, even when it is killed with SIGKILL.
"""

from __future__ import annotations

from arena.envs.base import Environment, EnvironmentConfig
from arena.envs.workers.layout import WorkerPlan, plan_workers, usable_cores
from arena.envs.workers.pool import WorkerEnvironment, WorkerError

__all__ = ["WorkerEnvironment", "WorkerError", "WorkerPlan", "build_environment", "plan_workers", "usable_cores"]


def build_environment(
    env_cls: type[Environment],
    config: EnvironmentConfig,
    *,
    num_envs: int,
    cameras: bool = False,
    plan: WorkerPlan | None = None,
) -> Environment:
    """Build ``num_envs`` envs of ``env_cls`` as ``config``'s ``workers`` / ``python`` ask.

    ``plan``: the run's plan, made once by the config loader (``ResolvedRun.worker_plan``);
    ``None`` plans here (:func:`plan_workers`), for callers without a resolved run. Returns the
    class itself (in-process) or a :class:`WorkerEnvironment` with the same vectorized
    contract, its workers under the plan's interpreter on this machine
    (:meth:`WorkerPlan.resolved`). Results do not depend on the choice: every episode is fixed
    by its seed.

    Raises:
        ValueError: the class cannot be split as asked (see :func:`plan_workers`).
        arena.errors.ArenaError: a worker could not be started or could not build its envs
            (the message holds the worker's traceback or exit status and its last output).
    """
    if plan is None:
        plan = plan_workers(env_cls, config, num_envs)
    elif sum(len(s) for s in plan.slices) not in (0, num_envs):
        raise ValueError(f"the worker plan holds {sum(len(s) for s in plan.slices)} envs, not num_envs = {num_envs}")
    if plan.in_process:
        return env_cls(config, num_envs=num_envs, cameras=cameras)
    return WorkerEnvironment(env_cls, config, plan=plan.resolved(), cameras=cameras)

