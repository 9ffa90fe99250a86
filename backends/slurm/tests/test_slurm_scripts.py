"""The sbatch scripts users read and Slurm runs, and the node spec each one's ``arena node``
supervises (its server and runner ``srun`` steps), compared with committed golden files.

pyxis and het jobs cannot run on the one-node test cluster, so their flags are checked here
only. After an intended change regenerate with ``ARENA_UPDATE_GOLDEN=1 pytest …`` and review
the diff of ``tests/golden/``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.launch.planning import plan_servers
from arena.launch.shell import MISSING_CHECK_MARK
from arena_slurm.backend import SlurmBackend
from arena_slurm.options import SlurmOptions
from arena_slurm.render import SIGNAL_SERVER, node_spec, node_spec_file, render_collect_script, render_node_spec, render_run_script

GOLDEN = Path(__file__).parent / "golden"
OUT = Path("/lustre/arena/outputs/pi0-eval")
REACH = {"type": "metaworld", "task": "reach-v3"}
SERVER_IMAGE = {
    "image": "nvcr.io#nvidia/arena-pi0-server:1.0",
    "command": ["serve-policy", "--host", "{host}", "--port", "{port}", "--checkpoint", "/models/pi0"],
    "env": {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5"},
    "secrets": ["HF_TOKEN"],
    "resources": {"cpu": 8, "gpu": 1, "memory": 64},
    "startup_timeout_s": 900,
    "readiness": "http:/healthz",
}


def experiment(runs: dict, slurm: dict | None = None, episodes: int = 8):
    return load_experiment_dict(
        {
            "launch": {"backend": "slurm", "slurm": slurm or {}},
            "shared": {"environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": episodes}},
            "runs": runs,
        },
        source="pi0-eval.yaml",
    )


def render(exp, run: str) -> str:
    options = exp.launch.options("slurm")
    return render_run_script(exp, run, plan_servers(exp).get(run), options, OUT)


def spec(exp, run: str):
    """The run's node spec (:class:`arena.launch.node.NodeSpec`)."""
    return node_spec(exp, run, plan_servers(exp).get(run), exp.launch.options("slurm"), OUT)


def steps(exp, run: str) -> str:
    """The shell lines ``arena node`` runs: the server step's (when there is one), then the runner's launcher."""
    found = spec(exp, run)
    return "\n".join([*([found.server.command] if found.server else []), found.launcher or ""]) + "\n"


def golden_spec(name: str, exp, run: str) -> None:
    check_golden(name, render_node_spec(exp, run, plan_servers(exp).get(run), exp.launch.options("slurm"), OUT))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ARENA_UPDATE_GOLDEN") or not path.exists():
        path.write_text(text)
        if not os.environ.get("ARENA_UPDATE_GOLDEN"):
            pytest.fail(f"{path} did not exist and was written; review it and commit it")
        return
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "rendered"))
        pytest.fail(f"rendered script differs from {path} (ARENA_UPDATE_GOLDEN=1 regenerates it if intended):\n{diff}")


def bash_syntax_ok(text: str, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text(text)
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if shutil.which("shellcheck"):
        lint = subprocess.run(["shellcheck", "-S", "warning", str(script)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout


def test_remote_policy_with_server_image_renders_pyxis_steps(tmp_path):
    exp = experiment(
        {"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": SERVER_IMAGE}},
        {
            "partition": "gpu",
            "account": "robotics",
            "time": "02:00:00",
            "container_mounts": ["/lustre/models:/models:ro"],
            "runner_image": "nvcr.io#nvidia/arena-runner:0.1",
        },
    )
    text = render(exp, "pi0")
    check_golden("remote_server_image.sbatch", text)
    golden_spec("remote_server_image.node.json", exp, "pi0")
    bash_syntax_ok(text, tmp_path)
    lines = steps(exp, "pi0")
    assert "--container-image=nvcr.io#nvidia/arena-pi0-server:1.0" in lines
    assert "--container-env=ARENA_SERVER_INSTANCE,HF_TOKEN,XLA_PYTHON_CLIENT_MEM_FRACTION" in lines
    assert "HF_TOKEN=" not in text + lines  # secret names only, never values


def test_local_policy_run_has_no_server_step(tmp_path):
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}})
    text = render(exp, "zero")
    check_golden("local_policy.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    assert spec(exp, "zero").server is None and "--overlap" not in steps(exp, "zero")


def test_hetjob_layout_puts_the_server_in_component_0(tmp_path):
    keyed = {**SERVER_IMAGE, "api_key_args": ["--api-key-env", "{api_key_env}"]}  # the command can require a key
    exp = experiment(
        {"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": keyed}},
        {"layout": "hetjob", "partition": "cpu", "server_partition": "gpu", "cpus": 4, "time": "60"},
    )
    text = render(exp, "pi0")
    check_golden("hetjob.sbatch", text)
    golden_spec("hetjob.node.json", exp, "pi0")
    bash_syntax_ok(text, tmp_path)
    header = text.split("set -uo pipefail")[0]
    server_part, runner_part = header.split("#SBATCH hetjob")
    assert "--partition=gpu" in server_part and "--gpus-per-node=1" in server_part
    assert "--partition=cpu" in runner_part and "--cpus-per-task=4" in runner_part
    assert "$SLURM_JOB_NODELIST_HET_GROUP_0" in text and "--het-group=1" in steps(exp, "pi0")


def test_server_and_runner_on_one_node_bind_loopback_without_a_key(tmp_path):
    exp = experiment({"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}})
    text = render(exp, "expert")
    found = spec(exp, "expert")
    assert "--host 127.0.0.1" in found.server.command and "0.0.0.0" not in text + steps(exp, "expert")
    assert "binds 127.0.0.1 (loopback: reachable from its own node only), no API key" in text
    assert found.server.client_host == "127.0.0.1" and "ARENA_SERVER_API_KEY" not in text + steps(exp, "expert")
    server, runner = _srun_lines(exp, "expert")  # the probe runs in the supervisor, on the server's node
    assert '--nodelist="$SERVER_NODE"' in runner and '--nodelist="$SERVER_NODE"' in server


def test_a_hetjob_server_is_exposed_and_arenas_own_requires_a_key_made_at_run_time(tmp_path):
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}, {"layout": "hetjob"}
    )
    text = render(exp, "expert")
    bash_syntax_ok(text, tmp_path)
    found = spec(exp, "expert")
    assert "--host 0.0.0.0" in found.server.command and "--api-key-env ARENA_SERVER_API_KEY" in found.server.command
    assert "EXPOSED to the network, requires an API key generated for this run" in text
    assert "ARENA_SERVER_API_KEY=$(od -An -N32 -tx1 /dev/urandom" in text  # made by the job, not written here
    assert found.server.api_key_env == "ARENA_SERVER_API_KEY"  # the probe presents it
    assert found.server_api_key_env == "ARENA_SERVER_API_KEY"  # the runner reads it by name
    assert exp.launch.options("slurm").layout == "hetjob"
    backend = SlurmBackend(exp.launch.options("slurm"))
    exposure = backend.exposures(exp, plan_servers(exp))["expert"]
    assert exposure.exposed and exposure.key == "generated"


def test_a_third_party_server_without_authentication_is_said_to_be_exposed_without_it(tmp_path):
    exp = experiment(
        {"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": {**SERVER_IMAGE, "api_key_args": []}}},
        {"layout": "hetjob"},
    )
    text = render(exp, "pi0")
    assert "binds 0.0.0.0: EXPOSED to the network, WITHOUT authentication" in text
    assert "ARENA_SERVER_API_KEY" not in text + steps(exp, "pi0")


def test_a_loopback_bind_in_a_hetjob_is_refused():
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}},
        {"layout": "hetjob", "server_bind": "127.0.0.1"},
    )
    with pytest.raises(ConfigError, match="server_bind=127.0.0.1 is loopback"):
        render(exp, "expert")


def test_sharded_run_is_a_job_array_with_a_server_per_element(tmp_path):
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}},
        {"shards": 4, "array_parallelism": 2},
        episodes=40,
    )
    text = render(exp, "expert")
    check_golden("shards.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    assert "#SBATCH --array=0-3%2" in text
    assert '--shard "$SLURM_ARRAY_TASK_ID/4"' in text


def test_extra_options_and_setup_commands_are_rendered(tmp_path):
    exp = experiment(
        {"zero": {"environment": REACH, "policy": {"type": "zero_action"}}},
        {
            "partition": "batch",
            "account": "robotics",
            "qos": "high",
            "time": "1-00:00:00",
            "nodes": 1,
            "gpus": 1,
            "cpus": 16,
            "memory": 48.5,
            "extra_sbatch": ["--constraint=h100", "#SBATCH --exclusive", "--mail-type=END"],
            "setup": ["module load cuda/12.4", "source /opt/arena/.venv/bin/activate"],
            "arena": "/opt/arena/.venv/bin/arena",
            "job_name_prefix": "eval",
        },
    )
    text = render(exp, "zero")
    check_golden("extra_options.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    for line in ("#SBATCH --constraint=h100", "#SBATCH --exclusive", "#SBATCH --qos=high", "#SBATCH --mem=49664M"):
        assert line in text
    assert text.index("module load cuda/12.4") < text.index("exec /opt/arena/.venv/bin/arena node")


def test_aggregation_job_collects_the_output_directory(tmp_path):
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"partition": "cpu"})
    text = render_collect_script(exp, exp.launch.options("slurm"), OUT)
    check_golden("collect.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    assert f"collect {OUT}" in text


def test_dry_run_writes_the_scripts_and_prints_a_summary_naming_them(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exp = experiment(
        {"zero": {"environment": REACH, "policy": {"type": "zero_action"}},
         "expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}
    )
    spec = SlurmBackend(exp.launch.options("slurm")).plan(exp, plan_servers(exp), OUT)
    assert "#!/bin/bash" not in spec and len(spec.splitlines()) < 10
    (where,) = tmp_path.glob("arena-dry-run-pi0-eval-slurm-*")
    for name in ("zero.sbatch", "expert.sbatch", "collect.sbatch"):
        assert (where / name).read_text().startswith("#!/bin/bash")
        assert str(where / name) in spec
    for run in ("zero", "expert"):
        assert str(where / node_spec_file(run)) in spec and (where / node_spec_file(run)).is_file()
    assert "server and runner steps in one allocation: --nodes=1 --cpus-per-task=3" in spec
    assert not OUT.exists()


def test_hetjob_with_shards_is_refused():
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}},
        {"layout": "hetjob", "shards": 2},
    )
    with pytest.raises(ConfigError, match="hetjob cannot be combined with shards"):
        SlurmBackend(exp.launch.options("slurm")).check(exp, plan_servers(exp))


def test_more_shards_than_episodes_is_refused():
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"shards": 9}, episodes=4)
    with pytest.raises(ConfigError, match="9 shards for 4 episode"):
        SlurmBackend(exp.launch.options("slurm")).check(exp, plan_servers(exp))


def test_image_only_server_needs_containers():
    exp = experiment(
        {"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": SERVER_IMAGE}},
        {"containers": False},
    )
    # a plugin's image-only ServerTask (the reference one also has a local_command)
    servers = {
        run: dataclasses.replace(plan, task=plan.task.model_copy(update={"local_command": None}))
        for run, plan in plan_servers(exp).items()
    }
    with pytest.raises(ConfigError, match="containers is false"):
        SlurmBackend(exp.launch.options("slurm")).check(exp, servers)


def test_a_server_without_a_pullable_image_is_refused_while_slurm_runs_containers():
    exp = experiment({"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}})
    # a plugin that knows of no public image (openpi, GR00T, Cosmos) leaves image unset and says how to get one
    servers = {
        run: dataclasses.replace(plan, task=plan.task.model_copy(update={"image_hint": "build it from the Dockerfile"}))
        for run, plan in plan_servers(exp).items()
    }
    with pytest.raises(ConfigError) as refused:
        SlurmBackend(exp.launch.options("slurm")).check(exp, servers)
    message = str(refused.value)
    assert "run 'pi0': key server.image: policy server 'metaworld-expert' has no container image" in message
    assert "(build it from the Dockerfile)" in message and "launch.slurm.containers=false" in message
    SlurmBackend(SlurmOptions(containers=False)).check(exp, servers)  # its local_command runs on the node


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"time": "two hours"}, "not a Slurm time limit"),
        ({"extra_sbatch": ["--exclusive\n--foo"]}, "line break"),
        ({"extra_sbatch": ["exclusive"]}, "not an sbatch option"),
        ({"container_mounts": ["/a:/b,/c:/d"]}, "one mount per item"),
        ({"layout": "two-jobs"}, "same-allocation"),
        ({"shards": 0}, "at least 1"),
        ({"partitoin": "gpu"}, "partitoin"),
    ],
)
def test_invalid_options_name_the_problem(options, message):
    with pytest.raises(ValueError, match=message):
        SlurmOptions(**options)


def test_invalid_option_in_experiment_file_is_a_config_error():
    with pytest.raises(ConfigError, match="time"):
        experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"time": "soon"})


def test_setup_commands_run_before_nounset_so_activation_scripts_may_read_unset_variables(tmp_path):
    # conda's and many module systems' activation scripts read unset variables; under
    # `set -u` the job would die there without writing its status.json.
    setup = ['echo "path:${ARENA_TEST_SURELY_UNSET_VARIABLE}"']
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"setup": setup})
    for text in (render(exp, "zero"), render_collect_script(exp, exp.launch.options("slurm"), OUT)):
        head = text[: text.index(setup[0]) + len(setup[0])] + "\necho setup-done\n"
        script = tmp_path / "head.sh"
        script.write_text(head)
        env = {k: v for k, v in os.environ.items() if k != "ARENA_TEST_SURELY_UNSET_VARIABLE"}
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode == 0 and "setup-done" in done.stdout, done.stderr
        assert "set -uo pipefail" in text[text.index(setup[0]) :]  # the rest still runs with nounset


def test_possibly_empty_argument_arrays_expand_safely_under_nounset(tmp_path):
    # bash < 4.4 (RHEL 7 and other long-lived cluster images) treats "${EMPTY[@]}" as an
    # unbound variable under `set -u`; the node line must not expand an empty array bare.
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}})
    text = render(exp, "zero")
    line = next(line for line in text.splitlines() if line.startswith("exec "))
    assert '${NOTED[@]+"${NOTED[@]}"}' in line and ' "${NOTED[@]}"' not in line


def _srun_lines(exp, run: str) -> tuple[str, str]:
    """The server step's and the runner step's srun lines (of the run's node spec)."""
    found = spec(exp, run)
    assert found.server is not None and "--job-name=arena-server" in found.server.command
    return found.server.command, found.launcher


def test_every_job_script_runs_one_node_supervisor_command_and_defines_no_lifecycle_of_its_own(tmp_path):
    exp = experiment(
        {"zero": {"environment": REACH, "policy": {"type": "zero_action"}},
         "expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}
    )
    scripts = SlurmBackend(exp.launch.options("slurm")).scripts(exp, plan_servers(exp), OUT)
    for run in ("zero", "expert"):
        text = scripts[f"{run}.sbatch"]
        bash_syntax_ok(text, tmp_path)
        assert [line for line in text.splitlines() if line.startswith("exec ")] == [
            f'exec arena node {OUT}/slurm/{run}.node.json ${{NOTED[@]+"${{NOTED[@]}}"}} "$@"'
        ]
        # the one state the script writes itself: arena missing on the node (no arena to write it)
        outside_check = re.sub(rf"# {MISSING_CHECK_MARK}:.*?\nfi\n", "", text, flags=re.S)
        assert not re.search(r"^\w+\(\) \{", text, re.M) and "status.json" not in outside_check
        assert not [line for line in text.splitlines() if "srun " in line and not line.startswith("#")]
        assert scripts[node_spec_file(run)].startswith("{")


@pytest.mark.parametrize(
    ("slurm", "server_memory", "job", "server_step", "runner_step"),
    [
        ({"memory": 4}, 2, ["--mem=6G"], "--mem=2G", "--mem=4G"),  # the job covers both steps
        ({"memory": 4}, None, [], None, None),  # the server's share is unknown: the partition's default
        ({}, 2, ["--mem=18G"], "--mem=2G", "--mem=16G"),  # the runner's share unset: arena's 16 GiB beside a server
        ({"gpus": 1}, 32, ["--mem=48G"], "--mem=32G", "--mem=16G"),  # openpi's pi05_libero task declares 32 GiB
        ({"memory": 4, "layout": "hetjob"}, 2, ["--mem=2G", "--mem=4G"], None, None),  # each component its own
        ({"layout": "hetjob"}, 2, ["--mem=2G"], None, None),
    ],
)
def test_memory_requests_cover_every_step_or_are_left_to_the_partition(slurm, server_memory, job, server_step, runner_step):
    server = {"local_command": ["{python}", "-m", "arena", "serve", "x", "--host", "{host}", "--port", "{port}"]}
    server["resources"] = {"memory": server_memory}  # None: declares none (the expert's task says 1 GiB)
    exp = experiment({"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": server}}, slurm)
    text = render(exp, "expert")
    assert re.findall(r"^#SBATCH (--mem=\S+)", text, re.M) == job
    server_line, runner_line = _srun_lines(exp, "expert")
    for line, flag in ((server_line, server_step), (runner_line, runner_step)):
        assert re.findall(r"--mem=\S+", line) == ([flag] if flag else [])
    note = next(line for line in text.splitlines() if line.startswith("# memory: "))
    if not job:
        assert "the partition's default" in note


def test_a_local_policy_run_asks_for_the_runners_memory_only(tmp_path):
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"memory": 3})
    assert re.findall(r"^#SBATCH (--mem=\S+)", render(exp, "zero"), re.M) == ["--mem=3G"]


def test_slurm_signals_the_job_before_its_time_limit_and_the_script_names_the_limit():
    run = {"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}
    text = render(experiment(run, {"time": "02:00:00", "time_signal_s": 120}), "zero")
    assert "#SBATCH --signal=B:USR1@120" in text and "#SBATCH --time=02:00:00" in text
    assert spec(experiment(run, {"time": "02:00:00", "time_signal_s": 120}), "zero").time_limit == "launch.slurm.time=02:00:00"
    assert "trap 'NOTED+=(--signalled USR1)' USR1" in text  # during the set-up lines; then arena's own
    untimed = spec(experiment(run), "zero")
    assert untimed.time_limit == "the partition's time limit; launch.slurm.time is unset"


def test_a_server_is_stopped_with_sigterm_on_its_step_and_killed_only_after_the_grace(tmp_path):
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}},
        {"server_stop_grace_s": 45, "server_restarts": 4},
    )
    found = spec(exp, "expert").server
    assert found.stop_grace_s == 45 and found.restarts == 4 and found.restarts_option == "launch.slurm.server_restarts"
    server_line, _ = _srun_lines(exp, "expert")
    assert "--job-name=arena-server" in server_line
    # srun answers SIGTERM by SIGKILLing its tasks ("forcing job termination"): signal the step
    assert found.signal_command == SIGNAL_SERVER and 'scancel --signal={signal} "$step"' in SIGNAL_SERVER


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"server_restarts": -1}, "server_restarts"),
        ({"time_signal_s": 5}, "time_signal_s"),
        ({"server_stop_grace_s": -1}, "server_stop_grace_s"),
    ],
)
def test_fault_handling_options_are_validated(options, message):
    with pytest.raises(ValueError, match=message):
        SlurmOptions(**options)


def test_a_dry_run_lists_server_images_still_to_name_once_per_task_and_writes_the_scripts(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runs = {f"r{i}": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}} for i in range(5)}
    exp = experiment(runs)
    servers = {
        run: dataclasses.replace(plan, task=plan.task.model_copy(update={"image_hint": "build it from the Dockerfile"}))
        for run, plan in plan_servers(exp).items()
    }
    spec = SlurmBackend(exp.launch.options("slurm")).plan(exp, servers, OUT)
    notes = [line for line in spec.splitlines() if "has no container image" in line]
    assert notes == [
        "#   run(s) r0, r1, r2 and 2 more: policy server 'metaworld-expert' has no container image (build it from the "
        "Dockerfile); set runs.<run>.server.image=IMAGE, or shared.server.image for every run; or run its "
        "local_command on the node with launch.slurm.containers=false"
    ]
    (where,) = tmp_path.glob("arena-dry-run-pi0-eval-slurm-*")
    # the five runs share one server task: one job (named by its first run) starts it once
    assert sorted(p.name for p in where.glob("r*.sbatch")) == ["r0.sbatch"]
    assert json.loads((where / "r0.node.json").read_text())["shared_with"] == ["r1", "r2", "r3", "r4"]
    assert "# arena: runs r0, r1, r2, r3, r4, sharing one policy server, of experiment" in (where / "r0.sbatch").read_text()
    assert "one server for 5 runs (r0 … r4)" in spec and "# policy servers started: 1 " in spec


def test_a_dry_run_with_a_runner_image_names_the_runs_whose_venv_the_runner_dockerfile_lacks(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    bridge = {"environment": {"type": "lerobot_env", "env": {"type": "pusht"}}, "policy": {"type": "zero_action"}}
    runs = {"bridge": bridge, "zero": {"environment": REACH, "policy": {"type": "zero_action"}}}
    for slurm, named in (({"runner_image": "registry/arena-runner:1"}, True), ({}, False)):  # no image: the node's own venvs
        exp = experiment(runs, slurm)
        text = SlurmBackend(exp.launch.options("slurm")).plan(exp, plan_servers(exp), OUT)
        notes = [line for line in text.splitlines() if "has no venv" in line]
        assert notes == ([
            "#   run bridge: an image built from docker/runner.Dockerfile has no venv 'lerobot' (it needs Python ==3.12.*, "
            "the image has 3.11); set launch.slurm.runner_image to an image that ran `arena venv setup lerobot` "
            "(ARENA_VENVS pointing at it)"
        ] if named else []), text


def test_a_server_task_in_a_declared_venv_runs_that_venvs_interpreter_unless_python_is_set(monkeypatch, tmp_path):
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "venvs"))
    server = {"venv": "model", "local_command": ["{python}", "-m", "arena", "serve", "x", "--host", "{host}", "--port", "{port}"]}
    run = {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": server}}
    venv_python = str(tmp_path / "venvs" / "model" / "bin" / "python")
    assert f"{venv_python} -m arena serve x" in steps(experiment(run), "expert")
    explicit = steps(experiment(run, {"python": "/opt/py/bin/python"}), "expert")
    assert "/opt/py/bin/python -m arena serve x" in explicit and venv_python not in explicit
