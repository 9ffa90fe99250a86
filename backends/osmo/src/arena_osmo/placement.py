"""Where each run's tasks go: pool and platform, checked against what the platform offers.

OSMO places a workflow in one pool and each task on a platform (a node type) of it. What a
platform offers (GPU type and count, GPU memory, host memory, cores) is user configuration,
``launch.osmo.platforms``, because arena cannot ask OSMO. Placement runs on the *effective*
options, after every command-line override, and refuses a submission that would put a
policy server (or a runner) on a platform where it cannot run — the review
finding of IsaacLab-Arena's multi-policy OSMO change, where a pool override applied after
the servers were derived could silently schedule them on the wrong hardware.

Precedence for a run's pool and its server's platform: ``placement.<run name>`` >
``placement.<server task name>`` > ``launch.osmo.pool`` / the first platform of the pool
that fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from arena.errors import ConfigError

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan
    from arena_osmo.options import OsmoOptions, PlatformSpec
    from arena_osmo.problems import Problems


@dataclass(frozen=True)
class Needs:
    """What one task needs from one node."""

    what: str
    cpu: int = 0
    gpu: int = 0
    memory_gb: float | None = None
    gpu_type: str | None = None
    gpu_memory_gb: float | None = None
    arch: str | None = None

    def describe(self) -> str:
        parts = [f"{self.cpu} CPU"]
        if self.gpu:
            parts.append(f"{self.gpu} × {self.gpu_type or 'any'} GPU" + (f" with {self.gpu_memory_gb:g} GiB" if self.gpu_memory_gb else ""))
        if self.memory_gb:
            parts.append(f"{self.memory_gb:g} GiB memory")
        if self.arch:
            parts.append(self.arch)
        return ", ".join(parts)


def shortfalls(needs: Needs, spec: PlatformSpec) -> list[str]:
    """Why ``spec`` cannot host ``needs`` (empty when it can)."""
    out: list[str] = []
    if needs.cpu > spec.cpus:
        out.append(f"needs {needs.cpu} CPU, a node has {spec.cpus}")
    if needs.memory_gb is not None and needs.memory_gb > spec.memory_gb:
        out.append(f"needs {needs.memory_gb:g} GiB memory, a node has {spec.memory_gb:g}")
    if needs.gpu > spec.gpus:
        out.append(f"needs {needs.gpu} GPU, a node has {spec.gpus}")
    if needs.gpu and needs.gpu_type and (spec.gpu_type or "").lower() != needs.gpu_type.lower():
        out.append(f"needs {needs.gpu_type} GPUs, the platform has {spec.gpu_type or 'none'}")
    if needs.gpu and needs.gpu_memory_gb:
        if spec.gpu_memory_gb is None:
            out.append(f"needs {needs.gpu_memory_gb:g} GiB per GPU, the platform's gpu_memory_gb is not described")
        elif needs.gpu_memory_gb > spec.gpu_memory_gb:
            out.append(f"needs {needs.gpu_memory_gb:g} GiB per GPU, the platform has {spec.gpu_memory_gb:g}")
    if needs.arch and spec.arch and needs.arch != spec.arch:
        out.append(f"needs {needs.arch}, the platform is {spec.arch}")
    return out


@dataclass(frozen=True)
class RunPlacement:
    """The pool of one run's group and the platforms of its runner and server."""

    run: str
    pool: str
    runner_platform: str
    server_platform: str | None


@dataclass(frozen=True)
class Placements:
    runs: dict[str, RunPlacement]


def runner_needs(options: OsmoOptions) -> Needs:
    r = options.runner
    return Needs(what="the runner", cpu=r.cpu, gpu=r.gpu, memory_gb=r.memory_gb)


def server_needs(plan: ServerPlan) -> Needs:
    assert plan.task is not None
    r = plan.task.resources
    return Needs(
        what=f"policy server '{plan.task.name}'",
        cpu=r.cpu,
        gpu=r.gpu,
        memory_gb=r.memory,
        gpu_type=r.gpu_type,
        gpu_memory_gb=r.gpu_memory_gb,
        arch=r.platform,
    )


def place(
    experiment: ResolvedExperiment, servers: dict[str, ServerPlan], options: OsmoOptions, problems: Problems
) -> Placements:
    """Place every run of ``experiment``; every problem goes to ``problems`` (all are reported
    together), a missing pool or platform description as a missing setting with a stand-in.

    Problems: no pool, a pool ``launch.osmo.platforms`` does not describe (missing), a
    placement key naming neither a run nor a server task, or a task whose needs its platform
    cannot meet (invalid). All are ``launch.osmo`` keys: the messages name the runs concerned,
    never locate the problem in a run.
    """
    source = experiment.source
    task_names = {p.task.name for p in servers.values() if p.task is not None}
    for key in options.placement:
        if key not in experiment.all_runs and key not in task_names:  # a resume launches some runs
            problems.add_invalid(ConfigError(
                f"placement key '{key}' names neither a run ({', '.join(experiment.all_runs)}) nor a policy server task "
                f"({', '.join(sorted(task_names)) or 'none'})",
                file=source,
                key=f"launch.osmo.placement.{key}",
            ))
    runs: dict[str, RunPlacement] = {}
    for name in experiment.runs:
        plan = servers.get(name)
        has_server = plan is not None and plan.task is not None
        by_run = options.placement.get(name)
        by_task = options.placement.get(plan.task.name) if has_server else None
        pool = (by_run and by_run.pool) or (by_task and by_task.pool) or options.pool
        if pool is None:
            pool = problems.add_missing("launch.osmo.pool", "not set: the OSMO pool; set launch.osmo.pool=POOL (see `osmo pool list`)")
        platforms = options.platforms.get(pool)
        if not platforms:
            if pool in options.platforms or not pool.startswith("<unset"):
                problems.add_missing(
                    f"launch.osmo.platforms.{pool}",
                    f"not set: what pool '{pool}' offers, so arena can check that the tasks fit; add launch.osmo.platforms.{pool}."
                    "<PLATFORM>: {gpu_type: ..., gpus: ..., gpu_memory_gb: ..., memory_gb: ..., cpus: ...} "
                    "(see `osmo resource list`)",
                )
            placeholder = f"<unset: launch.osmo.platforms.{pool}>"
            runs[name] = RunPlacement(name, pool, placeholder, placeholder if has_server else None)
            continue
        wanted = (by_run and by_run.platform) or (by_task and by_task.platform)
        server_platform = None
        if has_server:
            if wanted:
                key = "launch.osmo.placement." + (name if by_run and by_run.platform else plan.task.name)
            else:
                key = f"launch.osmo.platforms.{pool}"
            server_platform = _choose(platforms, server_needs(plan), wanted, pool, source, f" (run '{name}')", key, problems)
        elif by_run and by_run.platform:
            problems.add_invalid(ConfigError(
                f"placement.platform places a policy server, but run '{name}' has none", file=source,
                key=f"launch.osmo.placement.{name}.platform",
            ))
        runner_platform = _choose(
            platforms, runner_needs(options), options.runner.platform, pool, source, "",
            "launch.osmo.runner.platform" if options.runner.platform else f"launch.osmo.platforms.{pool}", problems,
        )
        runs[name] = RunPlacement(name, pool, runner_platform, server_platform)
    return Placements(runs=runs)


def _choose(
    platforms: dict[str, PlatformSpec], needs: Needs, wanted: str | None, pool: str, source: str | None, whose: str,
    key: str, problems: Problems,
) -> str:
    """The platform for ``needs``: ``wanted`` if it fits, else the first that does. A problem
    is recorded (and a stand-in returned) when none fits; ``whose`` names the run, if any."""
    stand_in = f"<no platform for {needs.what}>"
    if wanted is not None:
        spec = platforms.get(wanted)
        if spec is None:
            problems.add_invalid(ConfigError(
                f"pool '{pool}' has no platform '{wanted}' in launch.osmo.platforms (described: {', '.join(platforms)})",
                file=source, key=key,
            ))
            return stand_in
        shortfall = shortfalls(needs, spec)
        if shortfall:
            problems.add_invalid(ConfigError(
                f"refusing to place {needs.what} on {pool}/{wanted}{whose}: {'; '.join(shortfall)}",
                file=source, key=key,
            ))
            return stand_in
        return wanted
    reasons = []
    for name, spec in platforms.items():
        shortfall = shortfalls(needs, spec)
        if not shortfall:
            return name
        reasons.append(f"{name}: {'; '.join(shortfall)}")
    problems.add_invalid(ConfigError(
        f"no platform of pool '{pool}' can run {needs.what}{whose} ({needs.describe()}): {' | '.join(reasons)}; "
        "place the run in another pool with launch.osmo.placement.<run or server task>.pool",
        file=source, key=key,
    ))
    return stand_in
