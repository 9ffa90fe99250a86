"""Plan the policy servers of an experiment: which ServerTask each remote run needs.

For every run whose policy is remote, the factory a plugin registered for that policy
(``arena_register_server_tasks``) derives the ServerTask from the policy config, then the run's
``server:`` overrides apply. ``server: {external: true}`` means the user runs the server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arena.errors import ConfigError
from arena.servertask import ServerTask

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment, ResolvedRun
    from arena.plugins import PluginManager


@dataclass(frozen=True)
class ServerPlan:
    """The server of one run: a task to start, or an external one at ``host:port``."""

    run: str
    task: ServerTask | None
    external: bool
    host: str
    port: int


def started_task(plan: ServerPlan | None) -> ServerTask | None:
    """The server task a backend starts for ``plan``'s run; ``None`` for a local policy (no
    plan) or an external server (``server.external``)."""
    return plan.task if plan is not None and not plan.external else None


def is_remote(run: ResolvedRun) -> bool:
    """Whether the run's policy talks to a policy server (its config has remote_host/port)."""
    from arena.policies.remote import RemotePolicyConfig

    return isinstance(run.policy, RemotePolicyConfig) or (
        hasattr(run.policy, "remote_host") and hasattr(run.policy, "remote_port")
    )


def plan_servers(experiment: ResolvedExperiment, manager: PluginManager | None = None) -> dict[str, ServerPlan]:
    """Return a :class:`ServerPlan` per remote run (local-policy runs are absent).

    Raises:
        ConfigError: a remote policy has no registered server task and is not external, or
            the run's ``server:`` overrides make an invalid ServerTask.
    """
    from arena.plugins import get_plugin_manager

    registry = (manager or get_plugin_manager()).registry
    plans: dict[str, ServerPlan] = {}
    for name, run in experiment.runs.items():
        if not is_remote(run):
            continue
        host, port = run.policy.remote_host, run.policy.remote_port
        if run.server.external:
            plans[name] = ServerPlan(run=name, task=None, external=True, host=host, port=port)
            continue
        policy_name = run.policy_type if run.policy_type in registry.server_tasks else getattr(run.policy_cls, "name", "")
        factory = registry.server_tasks.get(policy_name)
        if factory is None:
            raise ConfigError(
                f"policy '{run.policy_type}' is remote but no plugin registers a server task for it; "
                "set `server: {external: true}` and remote_host/remote_port to use a server you run",
                file=experiment.source,
                run=name,
                key="server",
            )
        try:
            task = run.server.apply(factory(run.policy))
        except ValueError as exc:
            raise ConfigError(f"invalid server override: {exc}", file=experiment.source, run=name, key="server") from None
        plans[name] = ServerPlan(run=name, task=task, external=False, host=host, port=task.port)
    return plans


def share_key(run: str, task: ServerTask, client_key_env: str | None = None) -> str:
    """Which server instance ``run`` uses: runs with the same key share one. Tasks that are
    ``shareable`` share when they are the same task (:meth:`ServerTask.identity`) and their
    clients present the same key (``client_key_env``, :class:`arena.launch.exposure.Exposure`);
    any other task is the run's own. The one rule of every backend (local, Slurm, Ray)."""
    return f"{task.identity()}|{client_key_env}" if task.shareable else f"{run}:{task.name}"


def server_groups(runs: Iterable[str], servers: dict[str, ServerPlan],
                  client_key_env: Callable[[str, ServerPlan], str | None] | None = None) -> list[list[str]]:
    """``runs`` (in their order) grouped by the server they share (:func:`share_key`); a run
    without a server arena starts (a local policy, ``external``) is a group of its own. Each
    group is in the order of ``runs``; groups are in the order of their first run.
    ``client_key_env(run, plan)``: the key its clients present, where the backend may expose it."""
    groups: dict[str, list[str]] = {}
    for run in runs:
        plan = servers.get(run)
        if plan is None or plan.task is None or plan.external:
            groups[f"{run}:"] = [run]
            continue
        key = share_key(run, plan.task, client_key_env(run, plan) if client_key_env else None)
        groups.setdefault(key, []).append(run)
    return list(groups.values())


def missing_image(experiment: ResolvedExperiment, run: str, task: ServerTask) -> ConfigError:
    """The error for a backend that must run ``task`` in a container and has no image for it.

    Plugins leave ``image`` unset where they know of no image a cluster can pull (and say how
    to get one in ``image_hint``); the user names theirs in the run's ``server.image``.
    """
    hint = f" ({task.image_hint})" if task.image_hint else ""
    return ConfigError(
        f"policy server '{task.name}' has no container image{hint}; set runs.{run}.server.image=IMAGE, "
        "or shared.server.image for every run",
        file=experiment.source,
        run=run,
        key="server.image",
    )


def ignored_endpoints(experiment: ResolvedExperiment) -> list[tuple[str, str]]:
    """``(run, message)`` for every run whose policy sets ``remote_host`` / ``remote_port``
    although arena starts its server (not ``external``): the backend chooses where that server
    listens (the local backend and Slurm a free port, OSMO the ServerTask's), so the values
    written are not used. Reads which fields the experiment file gave (call it on a loaded
    experiment file, not on a snapshot, which spells out every field)."""
    out = []
    for name, run in experiment.runs.items():
        if not is_remote(run) or run.server.external:
            continue
        given = [f for f in ("remote_host", "remote_port") if f in run.policy.model_fields_set]
        if given:
            values = ", ".join(f"policy.{f} {getattr(run.policy, f)}" for f in given)
            out.append((
                name,
                f"{values} will not be used: arena starts this run's policy server itself and connects to the port "
                "the launch backend chooses (recorded in run_result.json); to use a server you run there, set "
                "`server: {external: true}`",
            ))
    return out
