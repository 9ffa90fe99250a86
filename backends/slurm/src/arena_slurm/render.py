"""Render the sbatch scripts of a submission from the package's jinja2 templates.

One script per run (``run.sbatch.j2``): the ``#SBATCH`` lines, the set-up lines, and one
command, ``exec arena node <run>.node.json`` (the script's own arguments are appended:
``--resume``). The node supervisor (:mod:`arena.launch.node`, arena-core's, the same policy
server lifecycle the local backend drives) reads that spec, rendered here
(:func:`render_node_spec`): it starts the policy server as an ``srun`` step on a free port,
probes it, checks that the socket on the port is the step's, runs the runner step ``srun ...
arena run-one``, and writes every state. A sharded run is a job array whose element K runs
shard K/N with its own server: with ``work: queue`` (the default) every element's runner
claims the run's episodes from ``OUTPUT_DIR/queue.sqlite``, with ``work: static`` element K
runs the episodes ``i % N == K``. Runs that share a policy server (the same server task,
:func:`arena.launch.planning.server_groups`, the local backend's rule; and the same number of
shards) are one job, named by its first run (:func:`groups`): its supervisor starts the server
once per node (array element) and runs the runner step of each of those runs in turn, each run's
states in its own work directory. ``collect.sbatch.j2`` is the final aggregation job.

Faults the job handles (the supervisor does): Slurm signals the batch shell, which is the
supervisor after its ``exec``, ``time_signal_s`` before the time limit
(``--signal=B:USR1@N``); SIGUSR1 goes on to the runner, so the run ends ``failed`` naming the
limit; a server step that dies while the runner works is restarted on the same port at most
``server_restarts`` times, then the runner is stopped with the cause its log states as the run's
error (``stop_reason`` + SIGUSR1); a server is stopped with SIGTERM and SIGKILLed only after
``server_stop_grace_s`` (``scancel --signal`` on its step, :data:`SIGNAL_SERVER`: ``srun``
itself answers SIGTERM by SIGKILLing its tasks). Memory: a job asks for the sum of its
steps' memory, and each step for its own, when the server's (its ServerTask's
``resources.memory``) is known (the runner's is ``memory``, or
:data:`RUNNER_MEMORY_BESIDE_SERVER_GIB` when unset); otherwise the partition's default applies. Facts used:
pyxis flags (``NVIDIA/pyxis`` README: ``--container-image``, ``--container-mounts``,
``--container-env`` takes names only), het jobs (``#SBATCH hetjob``, ``srun --het-group``,
``SLURM_JOB_NODELIST_HET_GROUP_0``; the batch script runs on the first node of component 0),
``srun --overlap`` (a step sharing the allocation's resources, so the runner step is not
blocked behind the server).

Who can reach the server (:mod:`arena.launch.exposure`): in ``same-allocation`` the server
binds loopback and the runner and probe steps are pinned to its node; in ``hetjob`` it binds
all interfaces and arena's own server requires an API key the job generates at run time
(``$ARENA_SERVER_API_KEY``: in the job's environment only, never in the script). The script
runs on the server's node, so after the probe the supervisor checks that the socket listening
on the port belongs to the server step (its processes carry ``$ARENA_SERVER_INSTANCE``, a value
unique to the attempt) and, when something else answered, starts the server again on another port.
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
from arena.launch.shell import DOUBLE_QUOTE_SPECIAL, in_double_quotes, one_line, require_command
from arena.launch.node import NodeServer, NodeSpec
from arena.launch.planning import started_task
from arena.rollout.claims import LEASE_ENV
from arena.outputs.layout import EXPERIMENT_FILE, SHARDS_DIR, run_dir
from arena.rollout.invocation import SERVER_HOST_ENV, SERVER_INFO_ENV, SERVER_PORT_ENV, SERVER_TASK_ENV, TIME_LIMIT_ENV
from arena_slurm.options import SlurmOptions

if TYPE_CHECKING:
    from arena.config import ResolvedExperiment
    from arena.launch.planning import ServerPlan

_PORT_TOKEN = "\x00ARENA_PORT\x00"
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
#: Marks the server step's processes, so the script can tell them from an impostor on the port.
INSTANCE_ENV = "ARENA_SERVER_INSTANCE"


#: Step name of a policy server (``srun --job-name``): the supervisor finds the step by it to signal it.
SERVER_STEP = "arena-server"
#: How the node supervisor signals the server step (``{signal}``: TERM or KILL): ``scancel
#: --signal`` on the newest step of that name (``srun`` would SIGKILL the tasks on SIGTERM).
SIGNAL_SERVER = (
    "step=$(squeue --steps --noheader --jobs \"$SLURM_JOB_ID\" --format '%i %j' 2>/dev/null"
    f" | awk '$2 == \"{SERVER_STEP}\" {{ print $1 }}' | tail -n1); "
    '[ -n "$step" ] && scancel --signal={signal} "$step"'
)
#: GiB the runner step is given beside a server that declares its memory while
#: ``launch.slurm.memory`` is unset (a simulator with a few env workers; raise
#: ``launch.slurm.memory`` for more): the job's ``--mem`` is this plus the server's.
RUNNER_MEMORY_BESIDE_SERVER_GIB = 16.0
#: What a job whose ``launch.slurm.arena`` is not a command on the node records as the fix.
ARENA_MISSING_FIX = (
    "set launch.slurm.arena to a command that runs arena on the compute nodes (a path such as "
    "/shared/venv/bin/arena, or `/shared/venv/bin/python -m arena`), or put arena on PATH with launch.slurm.setup "
    "(e.g. `source /shared/venv/bin/activate`)"
)
#: The ARENA_SLURM_JOB variable the script exports: the job (or array element) id for status.json.
JOB_ENV = "ARENA_SLURM_JOB"


def groups(experiment: ResolvedExperiment, servers: dict[str, ServerPlan], options: SlurmOptions) -> list[list[str]]:
    """The jobs of a submission, as the runs each one runs: the runs sharing a server
    (:func:`arena.launch.planning.server_groups`, with who can reach it) that have the same
    number of shards; a run without a server arena starts is a job of its own."""
    from arena.launch.planning import server_groups

    def key_env(run: str, plan: ServerPlan) -> str | None:
        exposure = server_exposure(experiment, run, plan, options)
        return exposure.client_key_env if exposure is not None else None

    found: list[list[str]] = []
    for group in server_groups(experiment.runs, servers, key_env):
        by_shards: dict[int, list[str]] = {}
        for run in group:
            by_shards.setdefault(options.shards_of(run), []).append(run)
        found += by_shards.values()
    return found


def node_spec_file(run: str) -> str:
    """The node supervisor's spec of ``run``, in the submission's ``slurm/`` directory."""
    return f"{run}.node.json"


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


def _memory(runner: float | None, server: float | None, has_server: bool, hetjob: bool) -> tuple[list[float | None], bool, str]:
    """``(--mem of each job component, whether each step asks for its own, a comment line)``.

    ``runner``: ``launch.slurm.memory``; ``server``: the ServerTask's ``resources.memory``
    (GiB, ``None``: not declared). A job whose steps share it asks for the sum (sbatch(1)
    ``--mem``: memory per node; both steps run on the first node) and each step for its own
    share (where memory is enforced, neither step can take the other's). A server that declares
    its memory always gets it: with ``launch.slurm.memory`` unset the runner's share is
    :data:`RUNNER_MEMORY_BESIDE_SERVER_GIB`. When the server's share is unknown the job gets the
    partition's default and the steps share it: a sum that left one step out would be too
    small. A het job's components ask for their own.
    """
    gib = memory_flag
    if not has_server:
        note = f"memory: --mem={gib(runner)} (launch.slurm.memory)" if runner else (
            "memory: the partition's default (launch.slurm.memory is unset)")
        return [runner], False, note
    if hetjob:
        note = "memory: " + ", ".join(
            f"{what} component {'--mem=' + gib(value) if value else 'the partition default'} ({source}{'' if value else ' unset'})"
            for what, value, source in (("server", server, "its ServerTask's resources.memory"), ("runner", runner, "launch.slurm.memory"))
        )
        return [server, runner], False, note
    if server:
        share = runner or RUNNER_MEMORY_BESIDE_SERVER_GIB
        source = "launch.slurm.memory" if runner else "launch.slurm.memory is unset: arena's share for a runner beside a server"
        note = f"memory: --mem={gib(share + server)}: the runner step's {gib(share)} ({source}) + the server step's {gib(server)} (its ServerTask)"
        return [share + server], True, note
    return [None], False, (
        "memory: the partition's default for both steps (the server task declares no memory; arena asks for the sum "
        "of the runner's and the server's when the server's is known)"
    )


def server_exposure(experiment: ResolvedExperiment, run_name: str, plan: ServerPlan | None, options: SlurmOptions) -> Exposure | None:
    """Where the server of ``run_name`` binds and whether it requires a key (``None``: no
    server arena starts). Loopback in ``same-allocation``, all interfaces in ``hetjob``,
    unless ``server_bind`` says otherwise.

    Raises:
        ConfigError: a loopback ``server_bind`` in a hetjob (the runner is on another node).
    """
    task = started_task(plan)
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
    shared_with: list[str] | None = None,
) -> dict[str, Any]:
    """The template values of one run's job (see ``templates/run.sbatch.j2``); ``shared_with``:
    the other runs of its server group, whose runners the job runs after ``run_name``'s."""
    run = experiment.runs[run_name]
    others = [r for r in shared_with or [] if r != run_name]
    shards = options.shards_of(run_name)
    task = started_task(plan)
    hetjob = options.layout == "hetjob" and task is not None
    out = str(output_dir)
    exposure = server_exposure(experiment, run_name, plan, options)
    generated = exposure is not None and exposure.key == "generated"

    runner_mounts = [*options.container_mounts, f"{out}:{out}"]
    runner_env = [*run.runner_secrets(), *(s for other in others for s in experiment.runs[other].runner_secrets()),
                  TIME_LIMIT_ENV]
    if task is not None:  # where the supervisor says the server is (and what it is)
        runner_env += [SERVER_HOST_ENV, SERVER_PORT_ENV, SERVER_INFO_ENV, SERVER_TASK_ENV]
    if generated:
        runner_env.append(GENERATED_KEY_ENV)
    runner_container = _container_flags(options.runner_image, runner_mounts, runner_env)
    group = ["--het-group=1"] if hetjob else []
    component_memory, step_memory, memory_note = _memory(
        options.memory, task.resources.memory if task is not None else None, task is not None, hetjob
    )
    # same-allocation: the runner shares the server's node (its loopback address)
    pin = ['--nodelist="$SERVER_NODE"'] if task is not None and not hetjob else []
    runner_flags = [*group, "--nodes=1", *pin, "--ntasks=1", f"--cpus-per-task={options.cpus}"]
    if options.gpus:
        runner_flags.append(f"--gpus={options.gpus}")
    if step_memory:
        runner_flags.append(f"--mem={memory_flag(options.memory or RUNNER_MEMORY_BESIDE_SERVER_GIB)}")
    runner_flags += runner_container

    common = _common_lines(options)
    extra = [_sbatch_escape(line) for line in options.extra_sbatch]
    server = None
    if task is None:
        components = [
            [*_resource_lines(options.partition, options.nodes, True, options.cpus, options.gpus, component_memory[0]), *common, *extra]
        ]
        layout_note = "external policy server" if plan is not None else "local policy, no policy server"
    else:
        res = task.resources
        server_cpus = max(1, res.cpu)
        assert exposure is not None
        in_container = bool(task.image) and options.containers
        argv = task.command if in_container else (task.local_command or [])
        # a task run in a declared venv (ServerTask.venv) takes that venv's interpreter, at the path it has
        # here (a cluster shares the file system), unless launch.slurm.python says otherwise
        python = task.local_python() if task.venv and "python" not in options.model_fields_set else options.python
        rendered = task.render(
            argv, host=exposure.bind, port=_PORT_TOKEN, python=python, api_key_env=exposure.server_key_env  # type: ignore[arg-type]
        )
        names = [*task.secrets, *task.env, INSTANCE_ENV, *([GENERATED_KEY_ENV] if generated else [])]
        container = _container_flags(task.image if in_container else None, options.container_mounts, names)
        if hetjob:
            components = [
                [*_resource_lines(options.server_partition or options.partition, 1, False, server_cpus, res.gpu, component_memory[0]), *common, *extra],
                [*_resource_lines(options.partition, options.nodes, True, options.cpus, options.gpus, component_memory[1]), *common, *extra],
            ]
            server_flags = ["--het-group=0", f"--job-name={SERVER_STEP}", "--nodes=1", "--ntasks=1", f"--cpus-per-task={server_cpus}"]
            nodelist = '"$SLURM_JOB_NODELIST_HET_GROUP_0"'
            where = "het-job component 0, its own node(s); the runner is component 1"
            layout_note = "heterogeneous job: server component 0, runner component 1"
        else:
            components = [
                [
                    *_resource_lines(
                        options.partition, options.nodes, True, options.cpus + server_cpus, options.gpus + res.gpu,
                        component_memory[0],
                    ),
                    *common,
                    *extra,
                ]
            ]
            server_flags = [f"--job-name={SERVER_STEP}", "--overlap", "--nodes=1", "--ntasks=1", '--nodelist="$SERVER_NODE"', f"--cpus-per-task={server_cpus}"]
            nodelist = '"$SLURM_JOB_NODELIST"'
            where = "srun --overlap step in this allocation, first node"
            layout_note = "server and runner steps in one allocation"
        if res.gpu:
            server_flags.append(f"--gpus={res.gpu}")
        if step_memory:
            server_flags.append(f"--mem={memory_flag(res.memory)}")
        wildcard = exposure.bind in ("0.0.0.0", "::")
        if not hetjob and (wildcard or is_loopback(exposure.bind)):
            client_host = "127.0.0.1"  # same node: loopback reaches it, whatever it binds
        else:  # $SERVER_NODE: the supervisor expands it (the script exports it)
            client_host = "$SERVER_NODE" if wildcard else exposure.bind
        server = {
            "name": task.name,
            "where": where,
            "nodelist": nodelist,
            "srun_flags": [*server_flags, *container],
            "command": _shell_words(rendered),
            "client_host": client_host,
            "exposure": exposure.describe(),
            "generated_key": generated,
            "restarts": options.server_restarts,
        }
    array = None
    if shards > 1:
        array = f"0-{shards - 1}" + (f"%{options.array_parallelism}" if options.array_parallelism else "")
    log_name = "slurm-%A_%a.log" if shards > 1 else "slurm-%j.log"
    status_dir = shlex.quote(str(run_dir(out, run_name)))
    if shards > 1:
        status_dir += f'/{SHARDS_DIR}/"$SLURM_ARRAY_TASK_ID"'
    arena_check = require_command(shlex.split(options.arena)[0], work_dir=status_dir, run=run_name, fix=ARENA_MISSING_FIX)
    return {
        "experiment": experiment.name,
        "run": run_name,
        "runs": [run_name, *others],
        "output_dir": out,
        "job_name": job_name(options, experiment.name, run_name),
        "log_path": f"{out}/{run_name}/{log_name}",
        "layout_note": layout_note,
        "array": array,
        "shards": shards,
        "components": components,
        "setup": options.setup,
        "arena": " ".join(shlex.quote(word) for word in shlex.split(options.arena)),
        "arena_check": arena_check,
        "server": server,
        "external": plan is not None and plan.external,
        "runner": {"srun_flags": runner_flags},
        "task": task,
        "exposure_obj": exposure,
        "spec_path": f"{out}/slurm/{node_spec_file(run_name)}",
        "key_env": GENERATED_KEY_ENV,
        "instance_env": INSTANCE_ENV,
        "memory_note": memory_note,
        "time_signal": options.time_signal_s,
        "time_limit": f"launch.slurm.time={options.time}" if options.time else "the partition's time limit; launch.slurm.time is unset",
        "stop_grace": options.server_stop_grace_s,
        "queue_lease_s": f"{options.lease_s:g}" if options.work == "queue" else None,
        "lease_env": LEASE_ENV,
    }


def render_run_script(
    experiment: ResolvedExperiment,
    run_name: str,
    plan: ServerPlan | None,
    options: SlurmOptions,
    output_dir: Path,
    shared_with: list[str] | None = None,
) -> str:
    """The sbatch script of run ``run_name`` and the runs ``shared_with`` it (a job array when
    they have more than one shard)."""
    context = run_context(experiment, run_name, plan, options, output_dir, shared_with)
    return _tidy(_environment().get_template("run.sbatch.j2").render(**context))


def node_spec(
    experiment: ResolvedExperiment,
    run_name: str,
    plan: ServerPlan | None,
    options: SlurmOptions,
    output_dir: Path,
    shared_with: list[str] | None = None,
) -> NodeSpec:
    """What the job's ``arena node`` runs (:class:`arena.launch.node.NodeSpec`): the runner step's
    ``srun`` line (once per run of the group, one after the other), and the server step's with
    how to signal it and mark its tasks."""
    context = run_context(experiment, run_name, plan, options, output_dir, shared_with)
    server = None
    info = context["server"]
    if info is not None:
        exposure = context["exposure_obj"]
        server = NodeServer(
            task=context["task"],
            command=f"exec srun {' '.join(info['srun_flags'])} {info['command']}",
            bind=exposure.bind,
            client_host=info["client_host"],
            api_key_env=exposure.client_key_env,
            restarts=options.server_restarts,
            restarts_option="launch.slurm.server_restarts",
            stop_grace_s=options.server_stop_grace_s,
            signal_command=SIGNAL_SERVER,
            instance_env=INSTANCE_ENV,
            info={"image": context["task"].image if options.containers else None, "bind": exposure.bind,
                  "exposed": exposure.exposed, "api_key": exposure.key},
        )
    return NodeSpec(
        output_dir=context["output_dir"],
        run=run_name,
        shared_with=context["runs"][1:],
        snapshot=f"{context['output_dir']}/{EXPERIMENT_FILE}",
        arena=shlex.split(options.arena),
        launcher=f"srun {' '.join(context['runner']['srun_flags'])}",
        server=server,
        server_api_key_env=GENERATED_KEY_ENV if info is not None and info["generated_key"] else None,
        time_limit=context["time_limit"],
        status_env={"slurm_job_id": JOB_ENV},
        forward_term=False,  # scancel signals every step itself; srun would SIGKILL run-one on a second SIGTERM
        queue=options.work == "queue",
    )


def render_node_spec(
    experiment: ResolvedExperiment,
    run_name: str,
    plan: ServerPlan | None,
    options: SlurmOptions,
    output_dir: Path,
    shared_with: list[str] | None = None,
) -> str:
    """:func:`node_spec` as the JSON file the job script names (``slurm/<run>.node.json``)."""
    return node_spec(experiment, run_name, plan, options, output_dir, shared_with).model_dump_json(indent=2) + "\n"


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
