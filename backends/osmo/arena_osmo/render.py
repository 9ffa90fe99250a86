"""Render an experiment as OSMO ``version: 2`` workflows.

One group per run, in the experiment's order:

- ``<group>-runner`` (the lead) runs ``arena run-one`` in the runner image on a single-run
  snapshot embedded as a file. Its ``exitActions`` mark run-one's exit codes 0-3 COMPLETE, so
  a run that failed still uploads its records and the collector still runs: the report shows
  it failed, not missing.
- ``<group>-server`` (remote runs only) is the run's own policy server, derived from the
  ServerTask its policy's plugin registers, so runs of different models mix in one workflow.
  The runner reaches it at ``{{host:<server task>}}`` and the ServerTask's port, after
  ``arena probe`` says it is ready. OSMO stops it when the lead ends. Server and runner are
  separate tasks, so the server binds all interfaces: exposed. arena's own server then
  requires a key generated for the submission, kept in an OSMO credential the backend
  creates at submit time (``key_credential``) and given to both tasks as
  ``$ARENA_SERVER_API_KEY``; the workflow file names the credential, never the key. A
  third-party server without authentication is reachable by whatever reaches its pod; the
  header says so.

Then a CPU-only ``collect`` group whose one task takes every runner's output as task inputs,
merges them, builds the report and uploads it to ``launch.osmo.output_url``.

Runs are grouped into workflows by pool; a pool's runs are split into several workflows (each
with its own collector) so no workflow holds more than ``max_tasks_per_workflow`` tasks
(OSMO's service-backend link broke on workflows of more than ~100 tasks, NVIDIA/OSMO#411).
Every rendered dict is validated against :mod:`arena_osmo.spec`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from arena.errors import ConfigError
from arena.launch.exposure import GENERATED_KEY_ENV, Exposure, decide_exposure
from arena.launch.shell import in_double_quotes, one_line
from arena_osmo.placement import Placements, place
from arena_osmo.spec import validate_workflow

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan
    from arena_osmo.options import OsmoOptions

#: run-one's exit codes: 0 completed, 2 configuration error, 3 failed or error episodes (1: usage).
RUNNER_COMPLETE_CODES = "0-3"
RUN_SCRIPT = "/tmp/arena/run.sh"
SNAPSHOT_FILE = "/tmp/arena/experiment.yaml"
COLLECT_FILE = "/tmp/arena/collect.json"
COLLECTOR_GROUP = "collect"
COLLECTOR_TASK = "collect-outputs"
PLACEHOLDER = "<unset: launch.osmo.{}>"
#: Stands for the name of the key credential, which ``submit`` creates with a fresh name.
KEY_CREDENTIAL_PLACEHOLDER = "arena-key-created-at-submit"
#: The key's name inside that credential.
KEY_CREDENTIAL_KEY = "api_key"


@dataclass
class RunTasks:
    """The OSMO names of one run's group and tasks."""

    run: str
    group: str
    runner: str
    server: str | None


@dataclass
class RenderedWorkflow:
    """One workflow: its dict (valid OSMO spec), its pool and the runs it holds."""

    name: str
    pool: str
    runs: list[RunTasks]
    spec: dict[str, Any]
    header: list[str] = field(default_factory=list)

    @property
    def output_url(self) -> str:
        return self.spec["workflow"]["groups"][-1]["tasks"][0]["outputs"][0]["url"]

    def text(self) -> str:
        """The workflow file: a comment header, then the YAML."""
        return "".join(f"# {line}\n" for line in self.header) + dump(self.spec)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: Any) -> str:
    """YAML with keys in order and multi-line strings as literal blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)


def slug(text: str, limit: int = 40) -> str:
    """A name part OSMO accepts: lowercase letters, digits and '-'."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "x"


def server_exposures(experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
    """Per run with a server task: it binds 0.0.0.0 (its own task, reached over the network)
    and arena's own server requires a key (the user's, else a generated one)."""
    out = {}
    for run, plan in servers.items():
        if plan.task is not None:
            policy_key_env = getattr(experiment.runs[run].policy, "api_key_env", None)
            out[run] = decide_exposure(plan.task, plan.task.command, "0.0.0.0", policy_key_env)
    return out


def render_workflows(
    experiment: ResolvedExperiment,
    servers: dict[str, ServerPlan],
    options: OsmoOptions,
    *,
    placeholders: bool,
    key_credential: str = KEY_CREDENTIAL_PLACEHOLDER,
) -> list[RenderedWorkflow]:
    """Render ``experiment`` as one or more OSMO workflows.

    ``placeholders``: where ``runner_image`` or ``output_url`` is unset, write a visible
    ``<unset: launch.osmo.…>`` (``--dry-run``) instead of refusing. ``key_credential``: the
    OSMO credential holding the generated server key (``api_key``), for runs whose server
    requires one.

    Raises:
        ConfigError: a required option is unset (without ``placeholders``), a placement the
            platforms cannot host, a server task without an image, a secret without an OSMO
            credential, or an ``output_url`` that split workflows would share.
    """
    placements = place(experiment, servers, options)
    image = _required(options.runner_image, "runner_image", experiment, placeholders)
    url = _required(options.output_url, "output_url", experiment, placeholders)
    if options.output_url is not None and "://" not in options.output_url:
        raise ConfigError(
            f"output_url {options.output_url!r} is not a URL such as s3://bucket/arena/{{{{workflow_id}}}}",
            file=experiment.source, key="launch.osmo.output_url",
        )
    _check_secrets(experiment, servers, options)

    names = list(experiment.runs)
    index = {name: i for i, name in enumerate(names)}
    shards = _split(names, servers, placements, options)
    base = options.workflow_name or f"arena-{slug(experiment.name, 45)}"
    if len(shards) > 1 and options.output_url is not None and "{{workflow_id}}" not in options.output_url.replace(" ", ""):
        raise ConfigError(
            f"the experiment needs {len(shards)} workflows and output_url has no {{{{workflow_id}}}}: their collectors "
            "would overwrite each other's report; add {{workflow_id}} to the URL",
            file=experiment.source, key="launch.osmo.output_url",
        )
    exposures = server_exposures(experiment, servers)
    workflows = []
    for k, (pool, runs) in enumerate(shards):
        name = base if len(shards) == 1 else f"{base}-{k + 1}"
        ctx = _Context(experiment, servers, options, placements, image, url, pool, exposures, key_credential)
        wf = ctx.workflow(name, [(index[r], r) for r in runs])
        wf.header = [
            f"arena experiment '{experiment.name}': workflow {k + 1} of {len(shards)} (pool {pool}), "
            f"{len(runs)} run(s), {sum(len(g['tasks']) for g in wf.spec['workflow']['groups'])} task(s)",
            *(
                f"  {t.group}: run '{t.run}'" + (f" with its {exposures[t.run].describe()}" if t.server else "")
                for t in wf.runs
            ),
            f"submit: {' '.join(submit_argv('WORKFLOW.yaml', pool, options.priority))}",
        ]
        try:
            validate_workflow(wf.spec)
        except ValidationError as exc:
            raise ConfigError(
                f"workflow {name} would not be a valid OSMO spec: {exc}", file=experiment.source, key="launch.osmo"
            ) from None
        workflows.append(wf)
    return workflows


def submit_argv(path: str, pool: str, priority: str) -> list[str]:
    """The ``osmo workflow submit`` command line of one workflow file."""
    return ["osmo", "workflow", "submit", path, "--pool", pool, "--priority", priority, "--format-type", "json"]


def _required(value: str | None, name: str, experiment: ResolvedExperiment, placeholders: bool) -> str:
    if value is not None:
        return value
    if placeholders:
        return PLACEHOLDER.format(name)
    hint = {
        "runner_image": "an image built from docker/runner.Dockerfile and pushed to a registry OSMO can pull from",
        "output_url": "where the collector publishes the report, e.g. s3://bucket/arena/{{workflow_id}}",
    }[name]
    raise ConfigError(f"launch.osmo.{name} is not set: {hint}", file=experiment.source, key=f"launch.osmo.{name}")


def _check_secrets(experiment: ResolvedExperiment, servers: dict[str, ServerPlan], options: OsmoOptions) -> None:
    for name, run in experiment.runs.items():
        env = getattr(run.policy, "api_key_env", None)
        if env and env not in options.credentials:
            raise ConfigError(
                f"the policy reads its API key from ${env}; on OSMO it comes from a credential: set "
                f"launch.osmo.credentials.{env}={{credential: NAME, key: KEY}} (`osmo credential set NAME --type GENERIC ...`)",
                file=experiment.source, run=name, key="launch.osmo.credentials",
            )
        plan = servers.get(name)
        if plan is not None and plan.task is not None:
            for secret in plan.task.secrets:
                if secret not in options.credentials:
                    raise ConfigError(
                        f"policy server '{plan.task.name}' needs the secret ${secret}: set "
                        f"launch.osmo.credentials.{secret}={{credential: NAME, key: KEY}}",
                        file=experiment.source, run=name, key="launch.osmo.credentials",
                    )


def _split(
    names: list[str], servers: dict[str, ServerPlan], placements: Placements, options: OsmoOptions
) -> list[tuple[str, list[str]]]:
    """``[(pool, runs)]``: runs grouped by pool, each chunk within the task limit."""
    by_pool: dict[str, list[str]] = {}
    for name in names:
        by_pool.setdefault(placements.runs[name].pool, []).append(name)
    shards: list[tuple[str, list[str]]] = []
    limit = options.max_tasks_per_workflow - 1  # the collector
    for pool, runs in by_pool.items():
        current: list[str] = []
        used = 0
        for run in runs:
            cost = 2 if _has_server(servers, run) else 1
            if current and used + cost > limit:
                shards.append((pool, current))
                current, used = [], 0
            current.append(run)
            used += cost
        shards.append((pool, current))
    return shards


def _has_server(servers: dict[str, ServerPlan], run: str) -> bool:
    plan = servers.get(run)
    return plan is not None and plan.task is not None


def _gi(gb: float) -> str:
    return f"{gb:g}Gi"


class _Context:
    """Renders the groups of one workflow."""

    def __init__(
        self, experiment, servers, options, placements: Placements, image: str, url: str, pool: str,
        exposures: dict[str, Exposure], key_credential: str,
    ) -> None:
        self.experiment = experiment
        self.exposures = exposures
        self.key_credential = key_credential
        self.servers = servers
        self.options: OsmoOptions = options
        self.placements = placements
        self.image = image
        self.url = url
        self.pool = pool
        self.resources: dict[str, dict[str, Any]] = {}

    def resource(self, prefix: str, spec: dict[str, Any]) -> str:
        """The name of a resource spec equal to ``spec`` (added if new)."""
        for name, existing in self.resources.items():
            if existing == spec and (name == prefix or name.startswith(prefix + "-")):
                return name
        name = prefix
        n = 2
        while name in self.resources:
            name = f"{prefix}-{n}"
            n += 1
        self.resources[name] = spec
        return name

    def workflow(self, name: str, runs: list[tuple[int, str]]) -> RenderedWorkflow:
        groups = []
        tasks = []
        for i, run in runs:
            group, rt = self.run_group(i, run)
            groups.append(group)
            tasks.append(rt)
        groups.append(self.collector_group(tasks))
        o = self.options
        wf: dict[str, Any] = {"name": name, "pool": self.pool}
        if o.labels:
            wf["labels"] = dict(o.labels)
        wf["timeout"] = {"exec_timeout": o.exec_timeout, "queue_timeout": o.queue_timeout}
        wf["resources"] = self.resources
        wf["groups"] = groups
        return RenderedWorkflow(name=name, pool=self.pool, runs=tasks, spec={"version": 2, "workflow": wf})

    # -- one run ------------------------------------------------------------------------------
    def run_group(self, i: int, run: str) -> tuple[dict[str, Any], RunTasks]:
        group = f"r{i}-{slug(run)}"
        plan = self.servers.get(run)
        has_server = plan is not None and plan.task is not None
        rt = RunTasks(run=run, group=group, runner=f"{group}-runner", server=f"{group}-server" if has_server else None)
        tasks = [self.runner_task(rt, plan)]
        if has_server:
            tasks.append(self.server_task(rt, plan))
        return {"name": group, "tasks": tasks}, rt

    def runner_task(self, rt: RunTasks, plan: ServerPlan | None) -> dict[str, Any]:
        o = self.options
        placement = self.placements.runs[rt.run]
        snapshot = self.run_snapshot(rt, plan)
        env = {
            "PYTHONUNBUFFERED": "1",
            "MUJOCO_GL": "egl" if o.runner.gpu else "osmesa",
            "PYOPENGL_PLATFORM": "egl" if o.runner.gpu else "osmesa",
        }
        exposure = self.exposures.get(rt.run) if rt.server else None
        if rt.server and exposure is not None:
            env["ARENA_SERVER_INFO"] = json.dumps(
                {"task": rt.server, "host": _host(rt.server), "port": plan.task.port, "log": "server.log",
                 "image": plan.task.image, "bind": exposure.bind, "exposed": exposure.exposed, "api_key": exposure.key}
            )
            if exposure.key == "generated":
                env["ARENA_SERVER_API_KEY_ENV"] = GENERATED_KEY_ENV  # run-one reads the key by this name
        task: dict[str, Any] = {
            "name": rt.runner,
            "lead": True,
            "image": self.image,
            "command": ["bash"],
            "args": [RUN_SCRIPT],
            "environment": env,
        }
        creds = _credentials(o, list(o.credentials))
        if exposure is not None and exposure.key == "generated":
            creds.setdefault(self.key_credential, {})[GENERATED_KEY_ENV] = KEY_CREDENTIAL_KEY
        if creds:
            task["credentials"] = creds
        task["files"] = [
            {"path": SNAPSHOT_FILE, "contents": snapshot},
            {"path": RUN_SCRIPT, "contents": self.run_script(rt, plan)},
        ]
        task["exitActions"] = {"COMPLETE": RUNNER_COMPLETE_CODES}
        task["resource"] = self.resource(
            "runner",
            {
                "cpu": o.runner.cpu,
                "gpu": o.runner.gpu,
                "memory": _gi(o.runner.memory_gb),
                "storage": _gi(o.runner.storage_gb),
                "platform": placement.runner_platform,
            },
        )
        return task

    def run_snapshot(self, rt: RunTasks, plan: ServerPlan | None) -> str:
        """The single-run snapshot the runner executes (server endpoint and watchdog set)."""
        from arena.config.yaml_io import dump_yaml

        exp = single_run_experiment(self.experiment, rt.run)
        if rt.server:
            exp = exp.with_policy_endpoint(rt.run, _host(rt.server), plan.task.port)
        header = (
            f"# Run '{rt.run}' of experiment '{self.experiment.name}' as `arena run-one` executes it in OSMO task "
            f"{rt.runner}.\n"
        )
        return header + dump_yaml(exp.snapshot())

    def run_script(self, rt: RunTasks, plan: ServerPlan | None) -> str:
        q = shlex.quote
        run_one = f"arena run-one {SNAPSHOT_FILE} --run {q(rt.run)} --output-dir {{{{output}}}}"
        lines = ["#!/bin/bash", f"# arena run '{one_line(rt.run)}'", "set -u"]
        if rt.server:
            task = plan.task
            timeout = f"{task.startup_timeout_s:g}"
            probe = f"arena probe {q(task.readiness)} \"$HOST\" \"$PORT\" --timeout {timeout}"
            api_env = self.exposures[rt.run].client_key_env
            if api_env:
                probe += f" --api-key-env {q(api_env)}"
            reason = (
                f"policy server {in_double_quotes(rt.server)} ({in_double_quotes(task.name)}) was not ready at "
                f"$HOST:$PORT after {timeout} s; see its server.log"
            )
            lines += [
                f"HOST='{_host(rt.server)}'",
                f"PORT={task.port}",
                f"# wait for the policy server (readiness {one_line(task.readiness)})",
                f"if ! {probe}; then",
                f"  python -m arena_osmo.runner_failure {{{{output}}}} {q(rt.run)} \"{reason}\"",
                "  exit 3",
                "fi",
                f"exec {run_one} --server-host \"$HOST\" --server-port \"$PORT\"",
            ]
        else:
            lines.append(f"exec {run_one}")
        return "\n".join(lines) + "\n"

    def server_task(self, rt: RunTasks, plan: ServerPlan) -> dict[str, Any]:
        task = plan.task
        if not task.image:
            raise ConfigError(
                f"policy server '{task.name}' has no container image; OSMO runs containers: set runs.{rt.run}.server.image=IMAGE "
                "or use `server: {external: true}`",
                file=self.experiment.source, run=rt.run, key="server.image",
            )
        if not task.command:
            raise ConfigError(
                f"policy server '{task.name}' has no command to run in its image", file=self.experiment.source, run=rt.run,
                key="server.command",
            )
        placement = self.placements.runs[rt.run]
        exposure = self.exposures[rt.run]
        out: dict[str, Any] = {
            "name": rt.server,
            "lead": False,
            "image": task.image,
            "command": task.render(task.command, host=exposure.bind, port=task.port, api_key_env=exposure.server_key_env),
        }
        if task.env:
            out["environment"] = dict(task.env)
        secrets = [*task.secrets, *([exposure.server_key_env] if exposure.key == "user" else [])]
        creds = _credentials(self.options, list(dict.fromkeys(secrets)))
        if exposure.key == "generated":
            creds.setdefault(self.key_credential, {})[GENERATED_KEY_ENV] = KEY_CREDENTIAL_KEY
        if creds:
            out["credentials"] = creds
        r = task.resources
        spec: dict[str, Any] = {"cpu": r.cpu, "gpu": r.gpu}
        if r.memory is not None:
            spec["memory"] = _gi(r.memory)
        spec["platform"] = placement.server_platform
        out["resource"] = self.resource(f"server-{slug(task.name, 30)}", spec)
        return out

    # -- the collector ------------------------------------------------------------------------
    def collector_group(self, runs: list[RunTasks]) -> dict[str, Any]:
        from arena.config.yaml_io import dump_yaml

        o = self.options
        shard = dataclasses.replace(
            single_run_experiment(self.experiment, None), runs={t.run: self.experiment.runs[t.run] for t in runs}
        )
        plan = {
            "experiment": self.experiment.name,
            "workflow": "{{workflow_id}}",
            "runs": {t.run: f"{{{{input:{t.runner}}}}}" for t in runs},
        }
        task = {
            "name": COLLECTOR_TASK,
            "lead": True,
            "image": self.image,
            "command": ["python", "-m", "arena_osmo.collector"],
            "args": [COLLECT_FILE, SNAPSHOT_FILE, "{{output}}"],
            "environment": {"PYTHONUNBUFFERED": "1", "MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"},
            "inputs": [{"task": t.runner} for t in runs],
            "outputs": [{"url": self.url}],
            "files": [
                {"path": COLLECT_FILE, "contents": json.dumps(plan, indent=2) + "\n"},
                {"path": SNAPSHOT_FILE, "contents": dump_yaml(shard.snapshot())},
            ],
            "resource": self.resource(
                "collector",
                {
                    "cpu": o.collector.cpu,
                    "gpu": 0,
                    "memory": _gi(o.collector.memory_gb),
                    "storage": _gi(o.collector.storage_gb),
                    "platform": self.placements.collector_platform[self.pool],
                },
            ),
        }
        return {"name": COLLECTOR_GROUP, "tasks": [task]}


def _host(task: str) -> str:
    return f"{{{{host:{task}}}}}"


def _credentials(options: OsmoOptions, env_names: list[str]) -> dict[str, dict[str, str]]:
    """OSMO's per-task form ``{credential: {ENV_NAME: key}}`` for ``env_names``."""
    out: dict[str, dict[str, str]] = {}
    for env in env_names:
        ref = options.credentials[env]
        out.setdefault(ref.credential, {})[env] = ref.key
    return out


def single_run_experiment(experiment: ResolvedExperiment, run: str | None) -> ResolvedExperiment:
    """``experiment`` with only ``run`` (all runs when None) and a launch section for the task.

    Inside a task the run executes with the local backend's semantics and the watchdog: the
    experiment's ``launch.watchdog``, or the default one (a long grace before the first
    episode, for a cold start and the first inference's compile).
    """
    from arena.config.models import LaunchConfig, WatchdogConfig
    from arena.plugins import get_plugin_manager

    watchdog = experiment.launch.watchdog or WatchdogConfig()
    launch = LaunchConfig.model_validate(
        {"backend": "local", "watchdog": watchdog.model_dump()}, context={"manager": get_plugin_manager()}
    )
    runs = experiment.runs if run is None else {run: experiment.runs[run]}
    return dataclasses.replace(experiment, launch=launch, runs=dict(runs))
