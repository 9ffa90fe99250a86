"""The sbatch scripts users read and Slurm runs, compared with committed golden files.

pyxis and het jobs cannot run on the one-node test cluster, so their flags are checked here
only. After an intended change regenerate with ``ARENA_UPDATE_GOLDEN=1 pytest …`` and review
the diff of ``tests/golden/``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.launch.planning import plan_servers
from arena_slurm.backend import SlurmBackend
from arena_slurm.options import SlurmOptions
from arena_slurm.render import render_collect_script, render_run_script

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
    bash_syntax_ok(text, tmp_path)
    assert "--container-image=nvcr.io#nvidia/arena-pi0-server:1.0" in text
    assert "--container-env=ARENA_SERVER_INSTANCE,HF_TOKEN,XLA_PYTHON_CLIENT_MEM_FRACTION" in text
    assert "HF_TOKEN=" not in text  # secret names only, never values


def test_local_policy_run_has_no_server_step(tmp_path):
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}})
    text = render(exp, "zero")
    check_golden("local_policy.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    assert "probe" not in text and "--overlap" not in text


def test_hetjob_layout_puts_the_server_in_component_0(tmp_path):
    keyed = {**SERVER_IMAGE, "api_key_args": ["--api-key-env", "{api_key_env}"]}  # the command can require a key
    exp = experiment(
        {"pi0": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": keyed}},
        {"layout": "hetjob", "partition": "cpu", "server_partition": "gpu", "cpus": 4, "time": "60"},
    )
    text = render(exp, "pi0")
    check_golden("hetjob.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    header = text.split("set -uo pipefail")[0]
    server_part, runner_part = header.split("#SBATCH hetjob")
    assert "--partition=gpu" in server_part and "--gpus-per-node=1" in server_part
    assert "--partition=cpu" in runner_part and "--cpus-per-task=4" in runner_part
    assert "$SLURM_JOB_NODELIST_HET_GROUP_0" in text and "--het-group=1" in text


def test_server_and_runner_on_one_node_bind_loopback_without_a_key(tmp_path):
    exp = experiment({"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}})
    text = render(exp, "expert")
    assert "--host 127.0.0.1" in text and "0.0.0.0" not in text
    assert "binds 127.0.0.1 (loopback: reachable from its own node only), no API key" in text
    assert "SERVER_HOST=127.0.0.1" in text and "ARENA_SERVER_API_KEY" not in text
    runner = next(line for line in text.splitlines() if line.startswith("srun") and "--overlap" not in line)
    probe = next(line for line in text.splitlines() if "--overlap" in line and "--cpus-per-task=1" in line)
    assert '--nodelist="$SERVER_NODE"' in runner and '--nodelist="$SERVER_NODE"' in probe


def test_a_hetjob_server_is_exposed_and_arenas_own_requires_a_key_made_at_run_time(tmp_path):
    exp = experiment(
        {"expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}, {"layout": "hetjob"}
    )
    text = render(exp, "expert")
    bash_syntax_ok(text, tmp_path)
    assert "--host 0.0.0.0" in text and "--api-key-env ARENA_SERVER_API_KEY" in text
    assert "EXPOSED to the network, requires an API key generated for this run" in text
    assert "ARENA_SERVER_API_KEY=$(od -An -N32 -tx1 /dev/urandom" in text  # made by the job, not written here
    probe = next(line for line in text.splitlines() if " probe " in line)
    assert probe.endswith("--api-key-env ARENA_SERVER_API_KEY \\")  # the probe presents it
    assert "--server-api-key-env ARENA_SERVER_API_KEY)" in text  # the runner reads it by name
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
    assert "ARENA_SERVER_API_KEY" not in text


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
    assert 'SHARD_ARGS=(--shard "$SHARD/4")' in text


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
    assert text.index("module load cuda/12.4") < text.index("run-one")


def test_aggregation_job_collects_the_output_directory(tmp_path):
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}}, {"partition": "cpu"})
    text = render_collect_script(exp, exp.launch.options("slurm"), OUT)
    check_golden("collect.sbatch", text)
    bash_syntax_ok(text, tmp_path)
    assert f"collect {OUT}" in text


def test_dry_run_prints_every_script(tmp_path):
    exp = experiment(
        {"zero": {"environment": REACH, "policy": {"type": "zero_action"}},
         "expert": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}}}
    )
    spec = SlurmBackend(exp.launch.options("slurm")).plan(exp, plan_servers(exp), OUT)
    assert spec.count("#!/bin/bash") == 3
    for name in ("zero.sbatch", "expert.sbatch", "collect.sbatch"):
        assert f"===== slurm/{name}" in spec


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
    # unbound variable under `set -u`; the runner line must not expand an empty array bare.
    exp = experiment({"zero": {"environment": REACH, "policy": {"type": "zero_action"}}})
    text = render(exp, "zero")
    runner = next(line for line in text.splitlines() if " run-one " in line)
    for name in ("SHARD_ARGS", "SERVER_ARGS"):
        assert f'${{{name}[@]+"${{{name}[@]}}"}}' in runner
        assert f' "${{{name}[@]}}"' not in runner
