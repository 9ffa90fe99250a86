"""Materialize the spec, then render SLURM (pyxis/enroot) and Docker submit scripts (spec §7).

Rendering never writes the spec: it verifies the materialized bytes against ``plan.spec``.
Scripts come from this package's Jinja2 templates and are checked with ``bash -n``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import jinja2

from arena_tao_cosmos_reason.compute import timeout_seconds
from arena_tao_cosmos_reason.dataset_inspect import materialize_manifest
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import atomic_write_text, sha256_bytes, sha256_file
from arena_tao_cosmos_reason.model_preparation import HELPER_NAME, PREPARATION_OK
from arena_tao_cosmos_reason.toml_emit import dump_and_check

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("arena_tao_cosmos_reason", "templates"),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
_ENV.filters["q"] = lambda v: shlex.quote(str(v))


def spec_text(plan: dict) -> str:
    return dump_and_check(plan["spec"])


def materialize(plan: dict) -> dict:
    """Write the TOML and generated manifests atomically on the controller; record checksums."""
    req = plan["planner_request"]
    if plan["input_frame"]["kind"] != "submission_host":
        raise CosmosPlanError("materialize for a remote SLURM frame needs the SSH writer; it is not available in this "
                              "build (write_spec must be visible on the controller)")
    text = spec_text(plan)
    atomic_write_text(req["write_spec"], text)
    generated = []
    for manifest in plan.get("generated_manifests", []):
        done = materialize_manifest(manifest["records"], manifest["dataset_family"], manifest["output"],
                                    manifest["sample_limit"], manifest["selected_tasks"], manifest["sources"])
        generated.append(done | {"container": manifest["container"]})
    config = {"original": req["write_spec"], "resolved": os.path.realpath(req["write_spec"]),
              "container": plan["config_container_path"], "sha256": sha256_bytes(text.encode("utf-8")),
              "materialized": True, "frame": "submission_host"}
    plan["config"], plan["generated_artifacts"] = config, generated
    return {"ok": True, "config": config, "generated_artifacts": generated}


def verify_materialized(plan: dict) -> None:
    """Fail when the spec on disk is missing or differs from the sealed spec."""
    expected = sha256_bytes(spec_text(plan).encode("utf-8"))
    path = plan["planner_request"]["write_spec"]
    if not os.path.isfile(path):
        raise CosmosPlanError(f"generated config is missing at {path}; rerun materialize")
    found = sha256_file(path)
    if found != expected:
        raise CosmosPlanError(f"generated config is stale: expected SHA256 {expected}, found {found}; rerun materialize")


def _bash_check(script: str) -> None:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CosmosPlanError(f"generated Bash job is invalid: {done.stderr.strip()}")


def _job_env(plan: dict, job_id: str) -> dict:
    results = plan["container_paths"]["results_dir"]
    env = dict(plan["environment"])
    env.update(TAO_JOB_ID=job_id, TAO_API_JOB_ID=job_id, TAO_STATUS_FILE=f"{results}/{job_id}/status.json")
    return env


def container_step(plan: dict) -> str:
    decoder = plan["decoder_artifact"]
    validator = (f"python3 -m cosmos_rl.tools.validate_video_override --map {shlex.quote(decoder['map'])}"
                 if decoder.get("enabled") and decoder.get("map") else "")
    return _ENV.get_template("container_step.sh.j2").render(gate=plan["preflight"]["container_startup"],
                                                            decoder_validator=validator, command=plan["command"])


def render_slurm(plan: dict, job_id: str) -> str:
    """The sbatch script; raises on every precondition of spec §7.1."""
    req = plan["planner_request"]
    if req["platform"] != "slurm":
        raise CosmosPlanError("SLURM script rendering requires platform=slurm")
    sqsh = (plan["image"].get("sqsh") or {}).get("path")
    if not (req["partition"] and req["account"] and sqsh):
        raise CosmosPlanError("SLURM partition, account, and SQSH path are required")
    if req["use_requeue"]:
        raise CosmosPlanError("requeue is disabled by default and is not validated for Cosmos training")
    if plan["decoder_artifact"].get("required") and not plan["decoder_artifact"].get("fingerprint"):
        raise CosmosPlanError("render requires a complete fingerprinted decoder compatibility artifact")
    seconds = timeout_seconds(req["timeout"])
    if not plan["container_mounts"]:
        raise CosmosPlanError("at least one explicit container mount is required for SLURM")
    if not job_id or not JOB_ID.match(job_id):
        raise CosmosPlanError("tao_job_id is unsafe for SLURM and result paths")
    verify_materialized(plan)
    results_host = req["results_dir"].rstrip("/")
    env = _job_env(plan, job_id)
    prep = None
    preparation = plan["model_preparation"]
    if preparation["kind"] == "cosmos3_omni_to_exact_qwen3_vl":
        helper = preparation["helper"]
        host_helper = Path(results_host) / job_id / "model-preparation" / HELPER_NAME
        atomic_write_text(host_helper, helper["text"])
        if sha256_file(host_helper) != helper["sha256"]:
            raise CosmosPlanError("model-preparation helper checksum mismatch")
        container_helper = f"{plan['container_paths']['results_dir'].rstrip('/')}/{job_id}/model-preparation/{HELPER_NAME}"
        prep = {"sqsh": plan["model_preparation_sqsh"] or sqsh,
                "command": (f"test \"$(sha256sum {shlex.quote(container_helper)} | cut -d' ' -f1)\" = {helper['sha256']} "
                            f"&& python3 {shlex.quote(container_helper)} && echo {PREPARATION_OK}")}
    exclusions = plan.get("slurm_node_exclusions") or {}
    cpu_policy = bool(req["exclusive"]) and req["nodes"] == 1
    dirs = list(dict.fromkeys([results_host, req["checkpoint_dir"], req["cache_dir"], f"{results_host}/{job_id}"]))
    script = _ENV.get_template("slurm_job.sh.j2").render(
        job_id=job_id, partition=req["partition"], account=req["account"], nodes=req["nodes"], gpus=req["gpus_per_node"],
        cpus=req["cpus_per_task"], time_limit=req["time_limit"], stdout=plan["slurm_logs"]["stdout"],
        stderr=plan["slurm_logs"]["stderr"], exclude=",".join(exclusions.get("validated") or []), qos=req["qos"],
        reservation=req["reservation"], exclusive=req["exclusive"], cpu_policy=cpu_policy, mkdirs=dirs,
        exit_file=f"{results_host}/{job_id}/child_exit_code", env=sorted(env.items()), master_port=req["master_port"],
        prep=prep, timeout_s=seconds, step_cpus='"$step_cpus_per_task"' if cpu_policy else req["cpus_per_task"],
        env_names=",".join(sorted(env)), sqsh=sqsh, mounts=",".join(plan["container_mounts"]), step=container_step(plan),
        plan_sha=plan["plan_artifact"]["sha256"])
    _bash_check(script)
    return script


def render_docker(plan: dict, job_id: str) -> str:
    """The single-node ``docker run -d`` submit script (spec §7.12)."""
    req = plan["planner_request"]
    if req["platform"] != "docker":
        raise CosmosPlanError("render-docker requires a Docker plan")
    if req["nodes"] != 1:
        raise CosmosPlanError("render-docker supports only single-node plans")
    if not job_id or not JOB_ID.match(job_id):
        raise CosmosPlanError("render-docker requires a safe --tao-job-id")
    if not plan["image"].get("tag"):
        raise CosmosPlanError("render-docker requires a resolved image")
    ids = plan["compute"].get("host_gpu_ids")
    if not req["gpus_per_node"] or not ids:
        raise CosmosPlanError("Docker plan has no resolved GPU allocation")
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise CosmosPlanError("Docker plan host_gpu_ids must be a list of non-empty strings")
    verify_materialized(plan)
    cont = plan["container_paths"]
    home = f"{cont['results_dir'].rstrip('/')}/.tao-runtime/home"
    env = _job_env(plan, job_id)
    env.update(HOME=home, USER="tao", LOGNAME="tao", XDG_CACHE_HOME=f"{home}/.cache", HF_HOME=f"{home}/.cache/huggingface",
               TORCHINDUCTOR_CACHE_DIR=f"{home}/.cache/torchinductor")
    mounts = list(plan["container_mounts"])
    for host, target in ((req["results_dir"], cont["results_dir"]), (req["checkpoint_dir"], cont["checkpoint_dir"]),
                         (req["cache_dir"], cont["cache_dir"]),
                         (os.path.dirname(os.path.abspath(req["write_spec"])), os.path.dirname(cont["spec_path"]))):
        spec = f"{host}:{target}"
        if not any(m.split(":")[1] == target for m in mounts):
            mounts.append(spec)
    script = _ENV.get_template("docker_submit.sh.j2").render(
        plan_sha=plan["plan_artifact"]["sha256"], results_host=req["results_dir"].rstrip("/"),
        mkdirs=[req["checkpoint_dir"], req["cache_dir"]], job_id=job_id, gpus="device=" + ",".join(ids),
        mounts=mounts, env=sorted(env.items()), image=plan["image"]["tag"], step=container_step(plan))
    _bash_check(script)
    return script
