"""Spec §10 SLURM and Docker rendering: T82-T92, with every section-7 invariant checked on text."""

import re
import subprocess

import pytest

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.node_exclusions import node_exclusions
from arena_tao_cosmos_reason.planner import build_plan
from cosmos_fixtures import write_model


def _sealed(make_request, workspace, name="plan.json", **overrides):
    path = workspace["root"] / name
    verbs.plan(make_request(**overrides).model_dump(), str(path))
    return str(path)


def test_slurm_script_invariants(make_request, workspace):
    script = verbs.render_slurm_verb(_sealed(make_request, workspace, backend="cosmos-framework"), "job-1")
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    directives = [l for l in lines if l.startswith("#SBATCH")]
    first_exec = next(i for i, l in enumerate(lines) if l and not l.startswith("#"))
    assert all(lines.index(d) < first_exec for d in directives)
    assert [d.split("=")[0] for d in directives[:12]] == [
        "#SBATCH --job-name", "#SBATCH --partition", "#SBATCH --account", "#SBATCH --nodes", "#SBATCH --ntasks",
        "#SBATCH --ntasks-per-node", "#SBATCH --gpus-per-node", "#SBATCH --cpus-per-task", "#SBATCH --time",
        "#SBATCH --no-requeue", "#SBATCH --output", "#SBATCH --error"]
    assert lines[first_exec] == "set -Eeuo pipefail" and lines[first_exec + 1] == "export SLURM_EXPORT_ENV=ALL"
    assert script.count("--container-image=") == 1
    assert "--no-container-remap-root --no-container-mount-home" in script
    env_flag = re.search(r"--container-env=(\S+)", script).group(1).split(",")
    assert env_flag == sorted(env_flag) and "TAO_STATUS_FILE" in env_flag
    assert "export TAO_STATUS_FILE=/ws/run/results/job-1/status.json" in script
    assert "timeout --signal=TERM --kill-after=30s 15300s srun" in script
    assert script.index('echo "$child_rc" > "$TAO_CHILD_EXIT_FILE"') < script.index('exit "$child_rc"')
    assert "Cosmos child process failed with exit code" in script
    assert "TAO_COSMOS_PACKAGED_RUNTIME_STARTUP_OK" in script
    assert script.count("TAO_PREFLIGHT_ASSERTION_FAILED") == 1
    assert "HF_TOKEN=" not in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_t82_requeue_is_refused(make_request):
    with pytest.raises(CosmosPlanError, match="requeue is disabled by default"):
        build_plan(make_request(use_requeue=True))


def test_t83_invalid_timeout_fields(make_request):
    with pytest.raises(CosmosPlanError, match="child timeout must use valid HH:MM:SS fields"):
        build_plan(make_request(timeout="03:99:00"))


def test_t85_exclusive_single_node_cpu_policy(make_request, workspace):
    script = verbs.render_slurm_verb(_sealed(make_request, workspace, exclusive=True, cpus_per_task=16), "job-2")
    assert "#SBATCH --cpus-per-task=16" in script and "#SBATCH --exclusive" in script
    assert "scontrol show job -o" in script
    assert "policy=allocated-exclusive-single-node" in script
    assert '--cpus-per-task="$step_cpus_per_task"' in script


INVENTORY = """\
NodeName=n1 State=DOWN Partitions=batch Gres=gpu:h100:8 Comment=(null)
NodeName=n2 State=IDLE+PLANNED Partitions=batch Gres=gpu:h100:8 Comment=Run network diagnostics
NodeName=n3 State=IDLE Partitions=batch Gres=gpu:h100:8 Comment=pyxis-enroot mount failure seen
NodeName=n4 State=MIXED Partitions=batch Gres=gpu:h100:8 Comment=ticket #io-error on scratch
NodeName=n5 State=IDLE Partitions=batch Gres=gpu:h100:8 Comment=reserved for the demo next week
NodeName=n6 State=DOWN Partitions=other Gres=gpu:h100:8 Comment=(null)
"""


def test_t86_node_exclusions_from_inventory(make_request, workspace):
    inv = workspace["root"] / "nodes.txt"
    inv.write_text(INVENTORY)
    result = node_exclusions(["n1", "old-node"], True, str(inv), "batch")
    assert result["validated"] == ["n1", "n2", "n3", "n4"]
    assert result["retired_or_missing"] == ["old-node"]
    assert result["auto_exclusion_reasons"]["n1"] == "scheduler_state=DOWN"
    assert result["auto_exclusion_reasons"]["n2"] == "scheduler_diagnostic_comment"
    script = verbs.render_slurm_verb(_sealed(make_request, workspace, exclude_node=["n1", "old-node"],
                                             exclude_unhealthy_inventory_nodes=True,
                                             slurm_node_inventory_file=str(inv)), "job-3")
    assert [l for l in script.splitlines() if l.startswith("#SBATCH --exclude")] == ["#SBATCH --exclude=n1,n2,n3,n4"]


def test_t88_exclusions_need_an_inventory(make_request):
    with pytest.raises(CosmosPlanError, match="--slurm-node-inventory-file is required"):
        build_plan(make_request(exclude_node=["n1"]))


def test_t89_retry_needs_record_owned_layout(make_request, workspace):
    path = _sealed(make_request, workspace)
    plan = artifact.load(path)
    plan["input_frame"] = {"kind": "slurm_remote", "verified_host": "login1",
                           "inspection_transport": "repository_helper_streamed_over_ssh"}
    artifact.save(plan, path)
    with pytest.raises(CosmosPlanError, match="must use the record-owned <action-root>/config/<spec> layout"):
        verbs.retry_plan(path, "job-9", "/x/run/train.toml", "/ws/run/train.toml", [], False, "", str(workspace["root"] / "r.json"))


def test_retry_plan_rebases_paths_and_reuses_inspection(make_request, workspace):
    inv = workspace["root"] / "nodes.txt"
    inv.write_text(INVENTORY)
    path = _sealed(make_request, workspace, exclude_node=["n1"], slurm_node_inventory_file=str(inv))
    plan = artifact.load(path)
    plan["input_frame"]["verified_host"] = "login1"
    artifact.save(plan, path)
    root = workspace["root"] / "attempt2"
    out = workspace["root"] / "retry.json"
    result = verbs.retry_plan(path, "job-10", str(root / "config" / "train.toml"), "/ws/attempt2/config/train.toml",
                              ["n5"], False, str(inv), str(out))
    retried = artifact.load(str(out))
    assert retried["retry_preparation"]["inspection_reused"] is True
    assert retried["datasets"] == plan["datasets"]
    assert retried["container_paths"]["results_dir"] == "/ws/attempt2/results"
    assert result["node_exclusions"]["validated"] == ["n1", "n5", "n2", "n3", "n4"]
    assert retried["slurm_logs"]["stdout"].endswith("attempt2/logs/%x-%j.out")


def test_t91_omni_preparation_step_on_slurm(make_request, workspace):
    omni = write_model(workspace["root"] / "omni", model_type="cosmos3_omni")
    donor = write_model(workspace["root"] / "qwen-arch", model_type="qwen3_vl")
    path = _sealed(make_request, workspace, backend="cosmos-framework", base_model_path_or_uri=str(omni),
                   base_model_format="cosmos3_omni", vlm_architecture_model_path_or_uri=str(donor))
    plan = artifact.load(path)
    prep = plan["model_preparation"]
    assert prep["kind"] == "cosmos3_omni_to_exact_qwen3_vl"
    assert prep["storage"]["scope"] == "compute_verified_shared_checkpoint_dir"
    assert prep["controller_local_output_forbidden"] is True
    vlm = plan["environment"]["VLM_SAFETENSORS_PATH"]
    assert vlm == plan["prepared_model_container_path"]
    assert vlm.startswith("/ws/run/checkpoints/prepared/") and vlm != "/ws/omni"
    script = verbs.render_slurm_verb(path, "job-11")
    assert script.index("TAO_COSMOS_MODEL_PREPARATION_OK") < script.index("packaged runtime startup check failed")
    assert script.count("--container-image=") == 2
    assert "TAO_COSMOS_PREPARATION_IMAGE_DIGEST" in script
    helper = workspace["root"] / "run" / "results" / "job-11" / "model-preparation" / "prepare_cosmos3_vlm_checkpoint.py"
    assert helper.is_file()


def test_t92_docker_submit_script(make_request, workspace):
    path = _sealed(make_request, workspace, platform="docker", backend="cosmos-framework", gpus_per_node=2,
                   effective_global_batch=2, sqsh_path="", ssh_key_path="", partition="", account="",
                   container_mount=[])
    plan = artifact.load(path)
    plan["compute"]["host_gpu_ids"] = ["2", "3"]
    artifact.save(plan, path)
    script = verbs.render_docker_verb(path, "job-12")
    assert "docker inspect job-12" in script and "job-12 already submitted" in script
    assert "--gpus device=2,3" in script
    for name in ("HOME=", "USER=", "LOGNAME=", "TORCHINDUCTOR_CACHE_DIR="):
        assert name in script
    assert '"$host_uid" -eq 0' in script and "refusing to run" in script
    assert re.search(r"-e HF_TOKEN(\s|$)", script) and "HF_TOKEN=" not in script
    assert script.count("--shm-size") == 1 and "--shm-size=32g" in script


def test_docker_gpu_discovery_with_fake_nvidia_smi(make_request, fake_bin, monkeypatch):
    fake_bin("nvidia-smi", 'printf "0, GPU-aaaa, 81559\\n1, GPU-bbbb, 8000\\n2, GPU-cccc, 81559\\n"')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-cccc,0")
    plan = build_plan(make_request(platform="docker", backend="cosmos-framework", gpus_per_node=0,
                                   effective_global_batch=2, sqsh_path="", container_mount=[]))
    assert plan["compute"]["host_gpu_ids"] == ["2", "0"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(CosmosPlanError, match="eligible GPUs"):
        build_plan(make_request(platform="docker", backend="cosmos-framework", gpus_per_node=0, sqsh_path=""))


def test_remote_inspection_over_fake_ssh(make_request, workspace, fake_bin, tmp_path):
    """Inputs absent on the controller are inspected on the login host (fake ssh replays a probe)."""
    import json

    from arena_tao_cosmos_reason.inputs import inspect_inputs, inspection_payload

    local = make_request()
    payload = inspect_inputs(inspection_payload(local, True))
    payload["frame"] = "target_compute"
    reply = tmp_path / "reply.json"
    reply.write_text(json.dumps(payload))
    fake_bin("ssh", f'case "$*" in *login-bad*) exit 255;; esac\ncat > /dev/null\ncat {reply}')
    req = make_request(base_model_path_or_uri="/cluster/models/nano", slurm_host=["login-bad", "login2"],
                       container_mount=[f"{workspace['root']}:/ws", "/cluster:/cluster"])
    plan = build_plan(req)
    assert plan["input_frame"] == {"kind": "slurm_remote", "verified_host": "login2",
                                   "inspection_transport": "repository_helper_streamed_over_ssh"}
    assert plan["model"]["fingerprint"] == payload["model"]["fingerprint"]
    fake_bin("ssh", "exit 255")
    with pytest.raises(CosmosPlanError, match="remote SLURM input inspection failed: login-bad"):
        build_plan(req)
