"""Render an experiment as OSMO ``version: 2`` workflows.

One group per run, in the experiment's order:

- ``<group>-runner`` (the lead) runs ``arena node`` (which runs ``arena run-one``) in the runner image on a single-run
  snapshot carried as a base64 file, so no template engine touches the user's text (OSMO
  renders the whole workflow file with Jinja and substitutes its tokens in every string; a
  prompt holding ``{{ }}``, ``{% %}`` or ``{# #}`` would otherwise be refused, break the
  submission or lose characters). Its ``exitActions`` mark run-one's exit codes 0-3
  COMPLETE. The runner **publishes its own records**: a ``checkpoint`` uploads its run
  directory to ``<output_url>/<run>`` every ``publish_interval`` and once more when the task
  ends, completed or failed (OSMO user guide, "Checkpointing"), so a runner that is killed
  (exit 137), evicted or fails costs only its own unpublished episodes, never another run's.
- ``<group>-server`` (remote runs only) is the run's own policy server, derived from the
  ServerTask its policy's plugin registers, so runs of different models mix in one workflow.
  The runner reaches it at ``{{host:<server task>}}`` and the ServerTask's port, after
  ``arena node``'s readiness probe says it is ready. OSMO stops it when the lead ends. Server and runner are
  separate tasks, so the server binds all interfaces: exposed. arena's own server then
  requires a key generated for the submission, kept in an OSMO credential the backend
  creates at submit time (``key_credential``) and given to both tasks as
  ``$ARENA_SERVER_API_KEY``; the workflow file names the credential, never the key. A
  third-party server without authentication is reachable by whatever reaches its pod; the
  header says so.

There is no collector task: ``arena collect`` downloads what each runner published, and marks
the runs that published nothing (or no final state) with OSMO's reason.

Credentials: a runner gets exactly the secrets its run names (its policy's ``api_key_env``
and the run's ``credentials``), a server task exactly its ServerTask's ``secrets``, each from
``launch.osmo.credentials``; the header of every workflow file lists them by name.

Runs are grouped into workflows by pool; a pool's runs are split into several workflows so no
workflow holds more than ``max_tasks_per_workflow`` tasks (OSMO's service-backend link broke
on workflows of more than ~100 tasks, NVIDIA/OSMO#411). Every rendered dict is validated
against :mod:`arena_osmo.spec`, and every file against OSMO's templating (:func:`arena_osmo.
spec.check_template_text`).
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import re
import shlex
from pathlib import PurePosixPath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from arena.errors import ConfigError
from arena.launch.exposure import GENERATED_KEY_ENV, Exposure, decide_exposure
from arena.launch.planning import missing_image
from arena.launch.node import NodeServer, NodeSpec
from arena.launch.shell import one_line, require_command
from arena.outputs.layout import EPISODES_FILE
from arena.rollout.invocation import resume_args
from arena_osmo.placement import Placements, place
from arena_osmo.problems import Problems
from arena_osmo.spec import check_template_text, validate_workflow

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.base import Resume
    from arena.launch.planning import ServerPlan
    from arena_osmo.options import OsmoOptions

#: run-one's exit codes: 0 completed, 2 configuration error, 3 failed or error episodes (1: usage).
RUNNER_COMPLETE_CODES = "0-3"
RUN_SCRIPT = "/tmp/arena/run.sh"
SNAPSHOT_FILE = "/tmp/arena/experiment.yaml"
#: What the runner task's ``arena node`` runs (beside the snapshot, which it names relatively).
NODE_SPEC_FILE = "/tmp/arena/node.json"
#: A resumed runner's finished records (gzip), restored into its run directory before run-one.
CARRIED_RECORDS = "/tmp/arena/resume/episodes.jsonl.gz"
#: Stands for the name of the key credential, which ``submit`` creates with a fresh name.
KEY_CREDENTIAL_PLACEHOLDER = "arena-key-created-at-submit"
#: The command the runner task's script calls (on the runner image's PATH) and, when it is
#: missing there, what the run's ``status.json`` says to do.
RUNNER_ARENA = "arena"
RUNNER_ARENA_FIX = (
    "launch.osmo.runner_image must have arena installed on its PATH: build it from docker/runner.Dockerfile of "
    "this repository and push it where the pool can pull from"
)
#: The key's name inside that credential.
KEY_CREDENTIAL_KEY = "api_key"


@dataclass
class RunTasks:
    """The OSMO names of one run's group and tasks, and the secrets each task gets."""

    run: str
    group: str
    runner: str
    server: str | None
    runner_secrets: list[str] = field(default_factory=list)
    server_secrets: list[str] = field(default_factory=list)
    generated_key: bool = False  # both tasks get the submission's key credential


@dataclass
class RenderedWorkflow:
    """One workflow: its dict (valid OSMO spec), its pool and the runs it holds."""

    name: str
    pool: str
    runs: list[RunTasks]
    spec: dict[str, Any]
    header: list[str] = field(default_factory=list)

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


def base64_file(path: str, data: bytes) -> dict[str, Any]:
    """An OSMO file whose contents travel base64-encoded (``base64: true``): OSMO writes the
    decoded bytes, and neither its Jinja rendering nor its token substitution can change them."""
    return {"path": path, "base64": True, "contents": base64.b64encode(data).decode("ascii")}


def file_bytes(spec_file: dict[str, Any]) -> bytes:
    """The bytes OSMO writes for one entry of a task's ``files``."""
    if spec_file.get("base64"):
        return base64.b64decode(spec_file["contents"])
    return spec_file["contents"].encode("utf-8")


def run_url(output_url: str, run: str) -> str:
    """Where the runner of ``run`` publishes its run directory."""
    return f"{output_url.rstrip('/')}/{run}"


def server_exposures(experiment: ResolvedExperiment, servers: dict[str, ServerPlan]) -> dict[str, Exposure]:
    """Per run with a server task: it binds 0.0.0.0 (its own task, reached over the network)
    and arena's own server requires a key (the user's, else a generated one)."""
    out = {}
    for run, plan in servers.items():
        if plan.task is not None:
            policy_key_env = getattr(experiment.runs[run].policy, "api_key_env", None)
            out[run] = decide_exposure(plan.task, plan.task.command, "0.0.0.0", policy_key_env)
    return out


def task_secrets(
    experiment: ResolvedExperiment, servers: dict[str, ServerPlan], exposures: dict[str, Exposure]
) -> dict[str, tuple[list[str], list[str]]]:
    """Per run: the secrets (variable names) its runner and its server task get. The runner:
    its policy's ``api_key_env`` and the run's ``credentials``; the server: its ServerTask's
    ``secrets``, and the user's API key when it requires that one."""
    out = {}
    for name, run in experiment.runs.items():
        plan = servers.get(name)
        server: list[str] = []
        if plan is not None and plan.task is not None:
            exposure = exposures[name]
            server = list(dict.fromkeys([*plan.task.secrets, *([exposure.server_key_env] if exposure.key == "user" else [])]))
        out[name] = (run.runner_secrets(), server)
    return out


def render_workflows(
    experiment: ResolvedExperiment,
    servers: dict[str, ServerPlan],
    options: OsmoOptions,
    *,
    placeholders: bool,
    resume: Resume | None = None,
    carried: dict[str, bytes] | None = None,
    key_credential: str = KEY_CREDENTIAL_PLACEHOLDER,
) -> tuple[list[RenderedWorkflow], Problems]:
    """Render ``experiment`` as one or more OSMO workflows.

    ``placeholders`` (``--dry-run``): a missing setting shows as ``<unset: KEY>`` and is
    listed in the returned :class:`Problems` instead of refusing. ``resume``: the runners
    start ``arena run-one --resume``; ``carried`` maps a run to its finished records (gzip
    of ``episodes.jsonl`` lines), which its runner restores first. ``key_credential``: the
    OSMO credential holding the generated server key (``api_key``), for runs whose server
    requires one.

    Raises:
        ConfigError / ConfigErrors: every problem at once: unset required options (without
            ``placeholders``), placements the platforms cannot host, a server task without
            an image, a secret without an OSMO credential, an ``output_url`` that split
            workflows would share, a workflow OSMO would refuse.
    """
    problems = Problems(experiment.source)
    placements = place(experiment, servers, options, problems)
    image = options.runner_image or problems.add_missing(
        "launch.osmo.runner_image",
        "not set: the image the runners run arena in (build docker/runner.Dockerfile, push it to a registry OSMO "
        "can pull from)",
    )
    url = options.output_url or problems.add_missing(
        "launch.osmo.output_url",
        "not set: where each runner publishes its records, e.g. s3://bucket/arena/{{workflow_id}}",
    )
    if options.output_url is not None and "://" not in options.output_url:
        problems.add_invalid(ConfigError(
            f"output_url {options.output_url!r} is not a URL such as s3://bucket/arena/{{{{workflow_id}}}}",
            file=experiment.source, key="launch.osmo.output_url",
        ))
    exposures = server_exposures(experiment, servers)
    secrets = task_secrets(experiment, servers, exposures)
    credentials = _credential_refs(secrets, servers, options, problems)
    images = _server_images(experiment, servers, problems)

    names = list(experiment.runs)
    index = {name: i for i, name in enumerate(names)}
    shards = _split(names, servers, placements, options)
    base = options.workflow_name or f"arena-{slug(experiment.name, 45)}"
    workflows = []
    for k, (pool, runs) in enumerate(shards):
        name = base if len(shards) == 1 else f"{base}-{k + 1}"
        ctx = _Context(experiment, servers, options, placements, image, url, pool, credentials, images, resume, carried or {})
        ctx.problems, ctx.exposures, ctx.secrets, ctx.key_credential = problems, exposures, secrets, key_credential
        wf = ctx.workflow(name, [(index[r], r) for r in runs])
        wf.header = _header(experiment, wf, k, len(shards), options, credentials, exposures, key_credential)
        try:
            validate_workflow(wf.spec)
            check_template_text(wf.text())
        except (ValidationError, ValueError) as exc:
            problems.add_invalid(ConfigError(
                f"workflow {name} would not be a valid OSMO spec: {exc}", file=experiment.source, key="launch.osmo"
            ))
        workflows.append(wf)
    problems.raise_if_any(allow_missing=placeholders)
    return workflows, problems


def _header(experiment, wf: RenderedWorkflow, k: int, count: int, options: OsmoOptions, credentials, exposures, key_credential) -> list[str]:
    tasks = sum(len(g["tasks"]) for g in wf.spec["workflow"]["groups"])
    lines = [f"arena experiment '{experiment.name}': workflow {k + 1} of {count} (pool {wf.pool}), {len(wf.runs)} run(s), {tasks} task(s)"]
    generated = f" and the generated server key ({key_credential}/{KEY_CREDENTIAL_KEY})"
    for t in wf.runs:
        lines.append(f"  {t.group}: run '{t.run}'" + (f" with its {exposures[t.run].describe()}" if t.server else ""))
        lines.append(f"    {t.runner} gets {_secret_list(t.runner_secrets, credentials)}" + (generated if t.generated_key else ""))
        if t.server:
            lines.append(f"    {t.server} gets {_secret_list(t.server_secrets, credentials)}" + (generated if t.generated_key else ""))
    lines.append(
        f"each runner publishes its run directory to <output_url>/<run> every {options.publish_interval} and when it ends"
    )
    lines.append(f"submit: {shlex.join(submit_argv('WORKFLOW.yaml', wf.pool, options.priority))}")
    return lines


def _secret_list(names: list[str], credentials: dict[str, tuple[str, str]]) -> str:
    if not names:
        return "no credentials"
    return "credentials " + ", ".join(f"{n} ({credentials[n][0]}/{credentials[n][1]})" for n in names)


def submit_argv(path: str, pool: str, priority: str) -> list[str]:
    """The ``osmo workflow submit`` command line of one workflow file."""
    return ["osmo", "workflow", "submit", path, "--pool", pool, "--priority", priority, "--format-type", "json"]


def _credential_refs(
    secrets: dict[str, tuple[list[str], list[str]]], servers: dict[str, ServerPlan], options: OsmoOptions, problems: Problems
) -> dict[str, tuple[str, str]]:
    """``{ENV_NAME: (credential, key)}`` for every secret a task needs; a missing one is recorded
    (under its own key ``launch.osmo.credentials.NAME``, naming who needs it) and stood in for."""
    needed: dict[str, list[str]] = {}
    for name, (runner, server) in secrets.items():
        for env in runner:
            needed.setdefault(env, []).append(f"the runner of run '{name}'")
        for env in server:
            needed.setdefault(env, []).append(f"policy server '{servers[name].task.name}' (run '{name}')")
    refs: dict[str, tuple[str, str]] = {}
    for env, who in needed.items():
        ref = options.credentials.get(env)
        if ref is not None:
            refs[env] = (ref.credential, ref.key)
            continue
        key = f"launch.osmo.credentials.{env}"
        placeholder = problems.add_missing(
            key,
            f"not set: ${env} is needed by {', '.join(who)}; on OSMO it comes from a credential: set {key}="
            "{credential: NAME, key: KEY} (`osmo credential set NAME --type GENERIC --payload KEY=...`)",
        )
        refs[env] = (placeholder, env)
    return refs


def _server_images(experiment: ResolvedExperiment, servers: dict[str, ServerPlan], problems: Problems) -> dict[str, str]:
    """The image of every run's server task (OSMO runs containers only)."""
    images = {}
    for name, plan in servers.items():
        if plan.task is None:
            continue
        if plan.task.image:
            images[name] = plan.task.image
            continue
        error = missing_image(experiment, name, plan.task)
        images[name] = problems.add_missing(error.key or "server.image", error.message, run=name)
    return images


def _split(
    names: list[str], servers: dict[str, ServerPlan], placements: Placements, options: OsmoOptions
) -> list[tuple[str, list[str]]]:
    """``[(pool, runs)]``: runs grouped by pool, each chunk within the task limit."""
    by_pool: dict[str, list[str]] = {}
    for name in names:
        by_pool.setdefault(placements.runs[name].pool, []).append(name)
    shards: list[tuple[str, list[str]]] = []
    limit = options.max_tasks_per_workflow
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
        credentials: dict[str, tuple[str, str]], images: dict[str, str], resume: Resume | None, carried: dict[str, bytes],
    ) -> None:
        self.experiment = experiment
        self.servers = servers
        self.options: OsmoOptions = options
        self.placements = placements
        self.image = image
        self.url = url
        self.pool = pool
        self.credentials = credentials
        self.images = images
        self.resume = resume
        self.carried = carried
        self.resources: dict[str, dict[str, Any]] = {}
        self.problems = Problems(experiment.source)
        self.exposures: dict[str, Exposure] = {}
        self.secrets: dict[str, tuple[list[str], list[str]]] = {}
        self.key_credential = KEY_CREDENTIAL_PLACEHOLDER

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
        runner_secrets, server_secrets = self.secrets[run]
        rt = RunTasks(
            run=run,
            group=group,
            runner=f"{group}-runner",
            server=f"{group}-server" if has_server else None,
            runner_secrets=runner_secrets,
            server_secrets=server_secrets,
            generated_key=has_server and self.exposures[run].key == "generated",
        )
        tasks = [self.runner_task(rt, plan)]
        if has_server:
            tasks.append(self.server_task(rt, plan))
        return {"name": group, "tasks": tasks}, rt

    def runner_task(self, rt: RunTasks, plan: ServerPlan | None) -> dict[str, Any]:
        o = self.options
        placement = self.placements.runs[rt.run]
        env = {
            "PYTHONUNBUFFERED": "1",
            "MUJOCO_GL": "egl" if o.runner.gpu else "osmesa",
            "PYOPENGL_PLATFORM": "egl" if o.runner.gpu else "osmesa",
        }
        task: dict[str, Any] = {
            "name": rt.runner,
            "lead": True,
            "image": self.image,
            "command": ["bash"],
            "args": [RUN_SCRIPT],
            "environment": env,
        }
        creds = self.task_credentials(rt.runner_secrets, rt.generated_key)
        if creds:
            task["credentials"] = creds
        task["files"] = [
            base64_file(SNAPSHOT_FILE, self.run_snapshot(rt).encode("utf-8")),
            {"path": RUN_SCRIPT, "contents": self.run_script(rt, plan)},
            base64_file(NODE_SPEC_FILE, self.node_spec(rt, plan).model_dump_json(indent=2).encode("utf-8")),
        ]
        if rt.run in self.carried:
            task["files"].append(base64_file(CARRIED_RECORDS, self.carried[rt.run]))
        task["checkpoint"] = [
            {"path": f"{{{{output}}}}/{rt.run}", "url": run_url(self.url, rt.run), "frequency": o.publish_interval}
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

    def task_credentials(self, env_names: list[str], generated_key: bool = False) -> dict[str, dict[str, str]]:
        """OSMO's per-task form ``{credential: {ENV_NAME: key}}`` for exactly ``env_names``
        (and the submission's generated server key)."""
        out: dict[str, dict[str, str]] = {}
        for env in env_names:
            credential, key = self.credentials[env]
            out.setdefault(credential, {})[env] = key
        if generated_key:
            out.setdefault(self.key_credential, {})[GENERATED_KEY_ENV] = KEY_CREDENTIAL_KEY
        return out

    def run_snapshot(self, rt: RunTasks) -> str:
        """The single-run snapshot the runner executes (the server's endpoint comes from the
        script's ``--server-host`` / ``--server-port``: a base64 file gets no token substituted)."""
        from arena.yaml_io import dump_yaml

        exp = single_run_experiment(self.experiment, rt.run)
        header = (
            f"# Run '{rt.run}' of experiment '{self.experiment.name}' as `arena run-one` executes it in OSMO task "
            f"{rt.runner}.\n"
        )
        return header + dump_yaml(exp.snapshot())

    def node_spec(self, rt: RunTasks, plan: ServerPlan | None) -> NodeSpec:
        """What the runner task's ``arena node`` runs (:class:`arena.launch.node.NodeSpec`): wait
        for the server task (its host is the OSMO token the script puts in ``$HOST``), then
        ``arena run-one``; the output directory is the script's ``$OUT``."""
        server = None
        if rt.server:
            exposure = self.exposures[rt.run]
            server = NodeServer(
                task=plan.task, command=None, client_host="$HOST", port=plan.task.port,
                api_key_env=exposure.client_key_env,
                info={"task": rt.server, "image": plan.task.image, "bind": exposure.bind, "exposed": exposure.exposed,
                      "api_key": exposure.key},
            )
        return NodeSpec(
            output_dir="$OUT", run=rt.run, snapshot=PurePosixPath(SNAPSHOT_FILE).name, server=server,
            server_api_key_env=GENERATED_KEY_ENV if rt.server and rt.generated_key else None,
        )

    def run_script(self, rt: RunTasks, plan: ServerPlan | None) -> str:
        """The runner task's script: the output directory, a resumed run's records, the server's
        host (an OSMO token), the check that ``arena`` is on the image's PATH (else the run's
        ``status.json`` says ``failed`` with the fix, published like any record), then one
        command, ``arena node`` (:mod:`arena.launch.node`)."""
        q = shlex.quote
        run_dir = f'"$OUT"/{q(rt.run)}'
        lines = ["#!/bin/bash", f"# arena run '{one_line(rt.run)}'", "set -u", "export OUT={{output}}", f"mkdir -p {run_dir}"]
        if rt.run in self.carried:
            lines += [
                "# resumed: the finished episodes of the earlier attempt, so run-one --resume skips them",
                f"gunzip -c {CARRIED_RECORDS} > {run_dir}/{EPISODES_FILE}",
            ]
        if rt.server:
            lines.append(f"export HOST='{_host(rt.server)}'")
        flags = "".join(f" {flag}" for flag in resume_args(self.resume.keep_errors)) if self.resume is not None else ""
        what = (f"waits for policy server {one_line(rt.server)} ({one_line(plan.task.readiness)} on $HOST:{plan.task.port}), "
                "then runs" if rt.server else "runs")
        lines += require_command(RUNNER_ARENA, work_dir=run_dir, run=rt.run, fix=RUNNER_ARENA_FIX)
        lines += [f"# arena node {what} arena run-one and writes the run's state ({NODE_SPEC_FILE})",
                  f"exec {RUNNER_ARENA} node {NODE_SPEC_FILE}{flags}"]
        return "\n".join(lines) + "\n"

    def server_task(self, rt: RunTasks, plan: ServerPlan) -> dict[str, Any]:
        task = plan.task
        if not task.command:
            self.problems.add_invalid(ConfigError(
                f"policy server '{task.name}' has no command to run in its image", file=self.experiment.source, run=rt.run,
                key="server.command",
            ))
        placement = self.placements.runs[rt.run]
        exposure = self.exposures[rt.run]
        out: dict[str, Any] = {
            "name": rt.server,
            "lead": False,
            "image": self.images[rt.run],
            "command": task.render(task.command, host=exposure.bind, port=task.port, api_key_env=exposure.server_key_env)
            or ["<unset: server.command>"],
        }
        if task.env:
            out["environment"] = dict(task.env)
        creds = self.task_credentials(rt.server_secrets, rt.generated_key)
        if creds:
            out["credentials"] = creds
        r = task.resources
        spec: dict[str, Any] = {"cpu": r.cpu, "gpu": r.gpu}
        if r.memory is not None:
            spec["memory"] = _gi(r.memory)
        spec["storage"] = _gi(r.storage if r.storage is not None else self.options.server_storage_gb)
        spec["platform"] = placement.server_platform
        out["resource"] = self.resource(f"server-{slug(task.name, 30)}", spec)
        return out


def _host(task: str) -> str:
    return f"{{{{host:{task}}}}}"


def finished_records(lines: list[str]) -> bytes:
    """What a resumed runner carries: the finished records' JSON lines, gzip-compressed."""
    return gzip.compress("".join(line if line.endswith("\n") else line + "\n" for line in lines).encode("utf-8"), mtime=0)


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
