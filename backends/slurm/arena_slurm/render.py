"""Render the sbatch scripts of a submission from the package's jinja2 templates.

One script per run (``run.sbatch.j2``): an optional policy-server step started in the
background on a port the job chooses, an ``arena probe`` step that waits for it, and the
runner step ``arena run-one``. A sharded run is a job array whose element K runs shard K/N
with its own server. ``collect.sbatch.j2`` is the final aggregation job. Facts used:
pyxis flags (``NVIDIA/pyxis`` README: ``--container-image``, ``--container-mounts``,
``--container-env`` takes names only), het jobs (``#SBATCH hetjob``, ``srun --het-group``,
``SLURM_JOB_NODELIST_HET_GROUP_0``; the batch script runs on the first node of component 0),
``srun --overlap`` (a step sharing the allocation's resources, so the runner step is not
blocked behind the server).

Who can reach the server (:mod:`arena.launch.exposure`): in ``same-allocation`` the server
binds loopback and the runner and probe steps are pinned to its node; in ``hetjob`` it binds
all interfaces and arena's own server requires an API key the job generates at run time
(``$ARENA_SERVER_API_KEY``: in the job's environment only, never in the script). The script
runs on the server's node, so after the probe it checks that the socket listening on the port
belongs to the server step (its processes carry ``$ARENA_SERVER_INSTANCE``, a value unique to
the attempt) and, when something else answered, starts the server again on another port.
"""

from __future__ import annotations

import math
import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from arena.errors import ConfigError, short_repr
from arena.launch.exposure import GENERATED_KEY_ENV, Exposure, decide_exposure, is_loopback
from arena.launch.shell import DOUBLE_QUOTE_SPECIAL, in_double_quotes, one_line
from arena_slurm.options import SlurmOptions

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan

_PORT_TOKEN = "\x00ARENA_PORT\x00"
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: Marks the server step's processes, so the script can tell them from an impostor on the port.
INSTANCE_ENV = "ARENA_SERVER_INSTANCE"


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("arena_slurm", "templates"),
        autoescape=False,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    # Everything that enters a script goes through one of these:
    env.filters["q"] = lambda value: shlex.quote(str(value))  # a shell word
    env.filters["dq"] = in_double_quotes  # text inside "..."
    env.filters["comment"] = one_line  # text of a `# ...` line
    env.filters["sbatch"] = _sbatch_value  # the value of an `#SBATCH --opt=VALUE` line
    return env


def _sbatch_value(value: object) -> str:
    """``value`` as sbatch reads an ``#SBATCH`` option: one word, nothing to quote.

    Raises:
        ConfigError: it holds whitespace, a quote, a backslash or a control character.
    """
    text = str(value)
    if re.search(r"[\s\"'\\\x00-\x1f\x7f]", text):
        raise ConfigError(
            f"{short_repr(text, 120)} cannot be written into an #SBATCH line (no spaces, quotes, backslashes or control "
            "characters): choose an output directory without them"
        )
    return text


def job_name(options: SlurmOptions, experiment: str, suffix: str) -> str:
    """``<prefix>-<experiment>-<suffix>`` with characters Slurm job names dislike replaced."""
    return _NAME_SAFE.sub("_", f"{options.job_name_prefix}-{experiment}-{suffix}")


def memory_flag(gib: float) -> str:
    """GiB as sbatch ``--mem``: whole GiB as ``NG``, otherwise MiB rounded up (``NM``)."""
    return f"{int(gib)}G" if float(gib).is_integer() else f"{math.ceil(gib * 1024)}M"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _double_quoted(arg: str) -> str:
    """``arg`` in double quotes with ``$``, backticks, quotes escaped; the port token -> ``${PORT}``."""
    escaped = DOUBLE_QUOTE_SPECIAL.sub(r"\\\1", arg)
    return '"' + escaped.replace(_PORT_TOKEN, "${PORT}") + '"'


def _shell_words(argv: list[str]) -> str:
    return " ".join(_double_quoted(a) if _PORT_TOKEN in a else shlex.quote(a) for a in argv)


def _common_lines(options: SlurmOptions) -> list[str]:
    lines = []
    for flag, value in (("account", options.account), ("qos", options.qos), ("time", options.time)):
        if value is not None:
            lines.append(f"--{flag}={value}")
    return lines


def _resource_lines(partition: str | None, nodes: int, per_node: bool, cpus: int, gpus: int, memory: float | None) -> list[str]:
    lines = [f"--partition={partition}"] if partition else []
    lines.append(f"--nodes={nodes}")
    lines.append("--ntasks-per-node=1" if per_node else "--ntasks=1")
    lines.append(f"--cpus-per-task={cpus}")
    if gpus:
        lines.append(f"--gpus-per-node={gpus}")
    if memory:
        lines.append(f"--mem={memory_flag(memory)}")
    return lines


def _sbatch_escape(line: str) -> str:
    # In #SBATCH lines a '#' (pyxis' registry#image) must be escaped (NVIDIA/pyxis README).
    return line.replace("#", "\\#")


def _container_flags(image: str | None, mounts: list[str], env_names: list[str]) -> list[str]:
    if not image:
        return []
    flags = [shlex.quote(f"--container-image={image}")]
    if mounts:
        flags.append(shlex.quote(f"--container-mounts={','.join(mounts)}"))
    names = sorted(dict.fromkeys(env_names))
    if names:
        flags.append(shlex.quote(f"--container-env={','.join(names)}"))
    return flags


def server_exposure(experiment: ResolvedExperiment, run_name: str, plan: ServerPlan | None, options: SlurmOptions) -> Exposure | None:
    """Where the server of ``run_name`` binds and whether it requires a key (``None``: no
    server arena starts). Loopback in ``same-allocation``, all interfaces in ``hetjob``,
    unless ``server_bind`` says otherwise.

    Raises:
        ConfigError: a loopback ``server_bind`` in a hetjob (the runner is on another node).
    """
    task = plan.task if plan is not None and not plan.external else None
    if task is None:
        return None
    hetjob = options.layout == "hetjob"
    requested = options.server_bind or ("0.0.0.0" if hetjob else "127.0.0.1")
    if hetjob and is_loopback(requested):
        raise ConfigError(
            f"launch.slurm.server_bind={requested} is loopback, but in a hetjob the runner runs on another node; "
            "leave it unset (0.0.0.0) or use the same-allocation layout",
            file=experiment.source, run=run_name, key="launch.slurm.server_bind",
        )
    in_container = bool(task.image) and options.containers
    argv = task.command if in_container else (task.local_command or [])
    policy_key_env = getattr(experiment.runs[run_name].policy, "api_key_env", None)
    return decide_exposure(task, argv, requested, policy_key_env)


def run_context(
    experiment: ResolvedExperiment,
    run_name: str,
    plan: ServerPlan | None,
    options: SlurmOptions,
    output_dir: Path,
) -> dict[str, Any]:
    """The template values of one run's job (see ``templates/run.sbatch.j2``)."""
    run = experiment.runs[run_name]
    shards = options.shards_of(run_name)
    task = plan.task if plan is not None and not plan.external else None
    hetjob = options.layout == "hetjob" and task is not None
    out = str(output_dir)
    api_key_env = getattr(run.policy, "api_key_env", None)
    exposure = server_exposure(experiment, run_name, plan, options)
    generated = exposure is not None and exposure.key == "generated"

    runner_mounts = [*options.container_mounts, f"{out}:{out}"]
    runner_env = [api_key_env] if api_key_env else []
    if generated:
        runner_env.append(GENERATED_KEY_ENV)
    runner_container = _container_flags(options.runner_image, runner_mounts, runner_env)
    group = ["--het-group=1"] if hetjob else []
    # same-allocation: the runner shares the server's node (its loopback address)
    pin = ['--nodelist="$SERVER_NODE"'] if task is not None and not hetjob else []
    runner_flags = [*group, "--nodes=1", *pin, "--ntasks=1", f"--cpus-per-task={options.cpus}"]
    if options.gpus:
        runner_flags.append(f"--gpus={options.gpus}")
    runner_flags += runner_container
    probe_flags = [*group, "--overlap", "--nodes=1", *pin, "--ntasks=1", "--cpus-per-task=1", *runner_container]

    common = _common_lines(options)
    extra = [_sbatch_escape(line) for line in options.extra_sbatch]
    server = None
    if task is None:
        components = [
            [*_resource_lines(options.partition, options.nodes, True, options.cpus, options.gpus, options.memory), *common, *extra]
        ]
        layout_note = "external policy server" if plan is not None else "local policy, no policy server"
    else:
        res = task.resources
        server_cpus = max(1, res.cpu)
        assert exposure is not None
        in_container = bool(task.image) and options.containers
        argv = task.command if in_container else (task.local_command or [])
        rendered = task.render(
            argv, host=exposure.bind, port=_PORT_TOKEN, python=options.python, api_key_env=exposure.server_key_env  # type: ignore[arg-type]
        )
        exports = [f"{key}={shlex.quote(value)}" for key, value in sorted(task.env.items())]
        names = [*task.secrets, *task.env, INSTANCE_ENV, *([GENERATED_KEY_ENV] if generated else [])]
        container = _container_flags(task.image if in_container else None, options.container_mounts, names)
        if hetjob:
            components = [
                [*_resource_lines(options.server_partition or options.partition, 1, False, server_cpus, res.gpu, res.memory), *common, *extra],
                [*_resource_lines(options.partition, options.nodes, True, options.cpus, options.gpus, options.memory), *common, *extra],
            ]
            server_flags = ["--het-group=0", "--nodes=1", "--ntasks=1", f"--cpus-per-task={server_cpus}"]
            nodelist = '"$SLURM_JOB_NODELIST_HET_GROUP_0"'
            where = "het-job component 0, its own node(s); the runner is component 1"
            layout_note = "heterogeneous job: server component 0, runner component 1"
        else:
            memory = None
            if options.memory or res.memory:
                memory = (options.memory or 0) + (res.memory or 0)
            components = [
                [
                    *_resource_lines(
                        options.partition, options.nodes, True, options.cpus + server_cpus, options.gpus + res.gpu, memory
                    ),
                    *common,
                    *extra,
                ]
            ]
            server_flags = ["--overlap", "--nodes=1", "--ntasks=1", '--nodelist="$SERVER_NODE"', f"--cpus-per-task={server_cpus}"]
            nodelist = '"$SLURM_JOB_NODELIST"'
            where = "srun --overlap step in this allocation, first node"
            layout_note = "server and runner steps in one allocation"
        if res.gpu:
            server_flags.append(f"--gpus={res.gpu}")
        wildcard = exposure.bind in ("0.0.0.0", "::")
        if not hetjob and (wildcard or is_loopback(exposure.bind)):
            client_host = "127.0.0.1"  # same node: loopback reaches it, whatever it binds
        # client_host is a shell word as written into the script (quoted here, not in the template)
        else:
            client_host = '"$SERVER_NODE"' if wildcard else shlex.quote(exposure.bind)
        server = {
            "name": task.name,
            "where": where,
            "nodelist": nodelist,
            "srun_flags": [*server_flags, *container],
            "command": _shell_words(rendered),
            "exports": exports,
            "readiness": task.readiness,
            "timeout": _seconds(task.startup_timeout_s),
            "api_key_env": exposure.client_key_env,
            "client_host": client_host,
            "exposure": exposure.describe(),
            "generated_key": generated,
        }
    array = None
    if shards > 1:
        array = f"0-{shards - 1}" + (f"%{options.array_parallelism}" if options.array_parallelism else "")
    log_name = "slurm-%A_%a.log" if shards > 1 else "slurm-%j.log"
    return {
        "experiment": experiment.name,
        "run": run_name,
        "output_dir": out,
        "job_name": job_name(options, experiment.name, run_name),
        "log_path": f"{out}/{run_name}/{log_name}",
        "layout_note": layout_note,
        "array": array,
        "shards": shards,
        "components": components,
        "setup": options.setup,
        "arena": " ".join(shlex.quote(word) for word in shlex.split(options.arena)),
        "server": server,
        "external": plan is not None and plan.external,
        "runner": {"srun_flags": runner_flags, "probe_flags": probe_flags},
        "key_env": GENERATED_KEY_ENV,
        "instance_env": INSTANCE_ENV,
    }


def render_run_script(
    experiment: ResolvedExperiment,
    run_name: str,
    plan: ServerPlan | None,
    options: SlurmOptions,
    output_dir: Path,
) -> str:
    """The sbatch script of run ``run_name`` (a job array when it has more than one shard)."""
    context = run_context(experiment, run_name, plan, options, output_dir)
    return _tidy(_environment().get_template("run.sbatch.j2").render(**context))


def render_collect_script(experiment: ResolvedExperiment, options: SlurmOptions, output_dir: Path) -> str:
    """The aggregation job: ``arena collect OUTPUT_DIR`` once every run job has ended."""
    out = str(output_dir)
    lines = [f"--partition={options.partition}"] if options.partition else []
    lines += ["--nodes=1", "--ntasks=1", "--cpus-per-task=1", *_common_lines(options)]
    return _tidy(_environment().get_template("collect.sbatch.j2").render(
        experiment=experiment.name,
        job_name=job_name(options, experiment.name, "collect"),
        log_path=f"{out}/slurm/collect-%j.log",
        sbatch_lines=lines,
        setup=options.setup,
        arena=" ".join(shlex.quote(word) for word in shlex.split(options.arena)),
        output_dir=out,
    ))


def _tidy(text: str) -> str:
    """At most one blank line in a row (template blocks that render empty leave more)."""
    return re.sub(r"\n{3,}", "\n\n", text)
