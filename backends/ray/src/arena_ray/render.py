"""What the Ray backend submits: each run's node spec, its Ray resources, and the KubeRay
``RayJob`` an equivalent Kubernetes submission would be.

The runs that share a policy server (the same server task:
:func:`arena.launch.planning.server_groups`, the local backend's rule) form a group; each group
becomes ``launch.ray.nodes`` tasks, each one ``arena node SPEC --shard K/N``
(:mod:`arena.launch.node`: it starts the server once on its node, bound to loopback, and runs
the group's ``arena run-one`` runners beside it, ``launch.ray.runners`` at a time). A run
without a server arena starts is a group of its own. The task asks Ray for the server task's
resources (``resources.gpu`` -> ``num_gpus``, ``resources.memory`` GiB -> ``memory`` bytes,
``resources.cpu`` plus ``launch.ray.runner_cpus`` per runner -> ``num_cpus``), so Ray places it
on a node that has them: a node hosts as many servers as its GPUs hold (its GPUs // the task's).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.launch.exposure import Exposure, decide_exposure
from arena.launch.node import NodeServer, NodeSpec
from arena.launch.planning import started_task
from arena.outputs.layout import EXPERIMENT_FILE

from arena_ray.options import RayOptions

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan

#: The folder of the submission's node specs, in the output directory.
SPECS_DIR = "ray"
_GIB = 1024**3


def arena_command(options: RayOptions) -> list[str]:
    """The command that runs arena on the nodes."""
    return list(options.arena) if options.arena else [sys.executable, "-m", "arena"]


def groups(experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> list[list[str]]:
    """The runs of ``experiment`` grouped by the server they share (loopback servers: no key)."""
    from arena.launch.planning import server_groups

    return server_groups(experiment.runs, servers)


def spec_file(group: list[str]) -> str:
    """The node spec's file name of a group (in :data:`SPECS_DIR`), named by its first run."""
    return f"{group[0]}.node.json"


def node_spec(run: str, plan: ServerPlan | None, options: RayOptions, output_dir: Path,
              shared_with: list[str] | None = None) -> NodeSpec:
    """The :class:`~arena.launch.node.NodeSpec` of every task of ``run``'s group (``run`` and
    ``shared_with``): its server (the task's ``local_command``, on a free loopback port of the
    node) and the runners with ``--queue`` (``work: queue``)."""
    server = None
    task = started_task(plan)
    if task is not None:
        argv = task.render(task.local_command or [], host="127.0.0.1", port="{port}", python=task.local_python())  # type: ignore[arg-type]
        exposure = server_exposure(plan)
        server = NodeServer(
            task=task, command="exec " + shlex.join(argv), bind="127.0.0.1", client_host="127.0.0.1",
            restarts=2, restarts_option="server.restarts (the Ray backend's node supervisor)",
            # what the server really binds: a command that takes no address (openpi's
            # serve_policy.py) binds 0.0.0.0 whatever arena asks
            info={"image": None, "bind": exposure.bind if exposure else "127.0.0.1",
                  "exposed": bool(exposure and exposure.exposed), "api_key": None},
        )
    return NodeSpec(
        output_dir=str(output_dir), run=run, snapshot=str(Path(output_dir) / EXPERIMENT_FILE),
        arena=arena_command(options), server=server, queue=options.work == "queue",
        shared_with=list(shared_with or []), runners=min(options.runners, 1 + len(shared_with or [])),
    )


def server_exposure(plan: ServerPlan | None) -> Exposure | None:
    """How the group's server is reached when a task asks it to bind loopback
    (:func:`arena.launch.exposure.decide_exposure`); ``None`` without a server to start."""
    task = started_task(plan)
    if task is None:
        return None
    return decide_exposure(task, list(task.local_command or []), "127.0.0.1", None)


def task_resources(plan: ServerPlan | None, options: RayOptions, runs: int = 1) -> dict[str, Any]:
    """The Ray resources of one task of a group of ``runs`` runs: ``num_cpus`` (the server's
    and one ``runner_cpus`` per runner at once), ``num_gpus`` and, when the server task
    declares host memory, ``memory`` (bytes)."""
    task = started_task(plan)
    cpus = options.runner_cpus * min(options.runners, max(1, runs)) + (task.resources.cpu if task is not None else 0)
    out: dict[str, Any] = {"num_cpus": cpus, "num_gpus": task.gpu_count if task is not None else 0}
    if task is not None and task.resources.memory:
        out["memory"] = int(task.resources.memory * _GIB)
    return out


def shard_words(k: int, options: RayOptions) -> list[str]:
    """``--shard K/N`` of task ``k`` (none for a run of one task)."""
    return ["--shard", f"{k}/{options.nodes}"] if options.nodes > 1 else []


def rayjob_manifest(experiment: ResolvedExperiment, servers: dict[str, ServerPlan], options: RayOptions,
                    output_dir: Path) -> dict[str, Any]:
    """The KubeRay ``RayJob`` (``ray.io/v1``) that runs this submission on Kubernetes: its
    entrypoint is ``arena run`` of the output directory's snapshot with ``address: auto``
    (the job's own cluster), its worker group as many pods as the most tasks running at once,
    each with the largest task's resources. Mount the output directory at the same path in
    every pod (a shared volume) and use an image that has arena installed."""
    found = groups(experiment, servers)
    per_task = [task_resources(servers.get(g[0]), options, len(g)) for g in found] or [task_resources(None, options)]
    cpus = max(r["num_cpus"] for r in per_task)
    gpus = max(r["num_gpus"] for r in per_task)
    memory = max((r.get("memory", 0) for r in per_task), default=0)
    limits: dict[str, Any] = {"cpu": str(int(cpus) if float(cpus).is_integer() else cpus)}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    if memory:
        limits["memory"] = f"{-(-memory // _GIB)}Gi"
    arena = " ".join(shlex.quote(w) for w in (options.arena or ["arena"]))
    entry = (f"{arena} run {shlex.quote(str(Path(output_dir) / EXPERIMENT_FILE))} launch.backend=ray "
             f"launch.ray.address=auto --output-dir {shlex.quote(str(output_dir))}")
    container = {"name": "ray", "image": options.image, "resources": {"limits": limits, "requests": dict(limits)}}
    name = "".join(c if c.isalnum() else "-" for c in f"arena-{experiment.name}".lower())[:63].strip("-")
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": entry,
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "0"},
                    "template": {"spec": {"containers": [{"name": "ray-head", "image": options.image}]}},
                },
                "workerGroupSpecs": [{
                    "groupName": "arena-nodes",
                    "replicas": options.nodes,
                    "minReplicas": 1,
                    "maxReplicas": options.nodes * max(1, len(found)),
                    "rayStartParams": {},
                    "template": {"spec": {"containers": [container]}},
                }],
            },
        },
    }
