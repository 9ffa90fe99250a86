"""Materialize the spec, then render SLURM (pyxis/enroot) and Docker submit scripts (spec §7).

Rendering never writes the spec: it verifies the materialized bytes against ``plan.spec``, in
the plan's compute frame (locally, or over ssh for a remote frame; :mod:`frame_files`). A
training plan and an evaluation plan render through the same *execution* description
(:func:`training_execution`, or the evaluation plan's ``spec_bundle.execution``): image, compute,
scheduler settings, mounts, environment and the container step. Scripts come from this
package's Jinja2 templates and are checked with ``bash -n``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess

import jinja2

from arena_tao_cosmos_reason.compute import timeout_seconds
from arena_tao_cosmos_reason.dataset_inspect import materialize_manifest
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.frame_files import LocalFrame, SshFrame
from arena_tao_cosmos_reason.hashing import sha256_bytes
from arena_tao_cosmos_reason.model_preparation import HELPER_NAME, PREPARATION_OK
from arena_tao_cosmos_reason.toml_emit import dump_and_check

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
JOB_IDENTITY = ("TAO_JOB_ID", "TAO_API_JOB_ID", "TAO_STATUS_FILE")
"""Variables bound at render time from ``--tao-job-id`` (spec §7.3 step 5)."""
_ENV = jinja2.Environment(loader=jinja2.PackageLoader("arena_tao_cosmos_reason", "templates"),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
_ENV.filters["q"] = lambda v: shlex.quote(str(v))

Frame = LocalFrame | SshFrame


def spec_text(plan: dict) -> str:
    return dump_and_check(plan["spec"])


def materialize(plan: dict, frame: Frame) -> dict:
    """Write the TOML and generated manifests atomically into ``frame``; record their checksums."""
    req = plan["planner_request"]
    text = spec_text(plan)
    digest = frame.write_text(req["write_spec"], text)
    generated = []
    for manifest in plan.get("generated_manifests", []):
        done = materialize_manifest(manifest["records"], manifest["dataset_family"], manifest["output"],
                                    manifest["sample_limit"], manifest["selected_tasks"], manifest["sources"],
                                    write=frame.write_text)
        generated.append(done | {"container": manifest["container"]})
    resolved = os.path.realpath(req["write_spec"]) if frame.kind == "submission_host" else req["write_spec"]
    config = {"original": req["write_spec"], "resolved": resolved, "container": plan["config_container_path"],
              "sha256": digest, "materialized": True, "frame": frame.kind}
    if frame.kind == "slurm_remote":
        config["host"] = plan["input_frame"]["verified_host"]
    plan["config"], plan["generated_artifacts"] = config, generated
    return {"ok": True, "config": config, "generated_artifacts": generated}


def verify_materialized(plan: dict, frame: Frame) -> None:
    """Fail when the spec (or a generated manifest) in the frame is missing or differs from the plan."""
    expected = sha256_bytes(spec_text(plan).encode("utf-8"))
    path = plan["planner_request"]["write_spec"]
    where = f"{plan['input_frame']['verified_host']}:{path}" if frame.kind == "slurm_remote" else path
    found = frame.sha256(path)
    if found is None:
        raise CosmosPlanError(f"generated config is missing at {where}; rerun materialize")
    if found != expected:
        raise CosmosPlanError(f"generated config is stale: expected SHA256 {expected}, found {found}; rerun materialize")
    for manifest in plan.get("generated_artifacts") or []:
        if frame.sha256(manifest["output"]) != manifest["sha256"]:
            raise CosmosPlanError(f"generated manifest {manifest['output']} is missing or changed; rerun materialize")


def _bash_check(script: str) -> None:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CosmosPlanError(f"generated Bash job is invalid: {done.stderr.strip()}")


def container_step(gate: str, command: str, decoder_map: str | None = None) -> str:
    """The wrapped step run in the container on every node (spec §7.5)."""
    validator = (f"python3 -m cosmos_rl.tools.validate_video_override --map {shlex.quote(decoder_map)}"
                 if decoder_map else "")
    return _ENV.get_template("container_step.sh.j2").render(gate=gate, decoder_validator=validator, command=command)


def training_execution(plan: dict) -> dict:
    """The execution description of a sealed training plan (the shape evaluation plans carry)."""
    req = plan["planner_request"]
    decoder = plan["decoder_artifact"]
    return {
        "kind": "training",
        "platform": req["platform"],
        "image": plan["image"]["tag"],
        "sqsh": (plan["image"].get("sqsh") or {}).get("path"),
        "nodes": req["nodes"], "gpus_per_node": req["gpus_per_node"], "cpus_per_task": req["cpus_per_task"],
        "host_gpu_ids": plan["compute"].get("host_gpu_ids"),
        "slurm": {key: req[key] for key in ("partition", "account", "qos", "reservation", "exclusive", "time_limit",
                                            "timeout", "master_port", "use_requeue")}
        | {"stdout": plan["slurm_logs"]["stdout"], "stderr": plan["slurm_logs"]["stderr"],
           "exclude": list((plan.get("slurm_node_exclusions") or {}).get("validated") or [])},
        "results_dir": req["results_dir"],
        "container_results_dir": plan["container_paths"]["results_dir"],
        "output_dirs": [req["results_dir"], req["checkpoint_dir"], req["cache_dir"]],
        "mounts": list(plan["container_mounts"]),
        "environment": dict(plan["environment"]),
        "step": container_step(plan["preflight"]["container_startup"], plan["command"],
                               decoder.get("container_map") if decoder.get("enabled") else None),
    }


def _job_env(execution: dict, job_id: str) -> dict:
    results = execution["container_results_dir"].rstrip("/")
    env = dict(execution["environment"])
    env.update(TAO_JOB_ID=job_id, TAO_API_JOB_ID=job_id, TAO_STATUS_FILE=f"{results}/{job_id}/status.json")
    return env


def _check_job_id(job_id: str | None, verb: str) -> None:
    if not job_id or not JOB_ID.match(job_id):
        raise CosmosPlanError(f"tao_job_id is unsafe for SLURM and result paths: {job_id!r} (--tao-job-id of {verb})")


def render_slurm(execution: dict, job_id: str, plan_sha: str, prep: dict | None = None) -> str:
    """The sbatch script of an execution; raises on every precondition of spec §7.1."""
    slurm = execution["slurm"]
    if execution["platform"] != "slurm":
        raise CosmosPlanError("SLURM script rendering requires platform=slurm")
    if not (slurm["partition"] and slurm["account"] and execution["sqsh"]):
        raise CosmosPlanError("SLURM partition, account, and SQSH path are required")
    if slurm["use_requeue"]:
        raise CosmosPlanError("requeue is disabled by default and is not validated for Cosmos training")
    seconds = timeout_seconds(slurm["timeout"])
    if not execution["mounts"]:
        raise CosmosPlanError("at least one explicit container mount is required for SLURM")
    _check_job_id(job_id, "render-slurm")
    results_host = execution["results_dir"].rstrip("/")
    env = _job_env(execution, job_id)
    cpu_policy = bool(slurm["exclusive"]) and execution["nodes"] == 1
    dirs = list(dict.fromkeys([*(d.rstrip("/") for d in execution["output_dirs"]), f"{results_host}/{job_id}"]))
    script = _ENV.get_template("slurm_job.sh.j2").render(
        job_id=job_id, partition=slurm["partition"], account=slurm["account"], nodes=execution["nodes"],
        gpus=execution["gpus_per_node"], cpus=execution["cpus_per_task"], time_limit=slurm["time_limit"],
        stdout=slurm["stdout"], stderr=slurm["stderr"], exclude=",".join(slurm["exclude"]), qos=slurm["qos"],
        reservation=slurm["reservation"], exclusive=slurm["exclusive"], cpu_policy=cpu_policy, mkdirs=dirs,
        exit_file=f"{results_host}/{job_id}/child_exit_code", env=sorted(env.items()), master_port=slurm["master_port"],
        prep=prep, timeout_s=seconds, step_cpus='"$step_cpus_per_task"' if cpu_policy else execution["cpus_per_task"],
        env_names=",".join(sorted(env)), sqsh=execution["sqsh"], mounts=",".join(execution["mounts"]),
        step=execution["step"], plan_sha=plan_sha, kind=execution["kind"])
    _bash_check(script)
    return script


def render_docker(execution: dict, job_id: str, plan_sha: str) -> str:
    """The single-node ``docker run -d`` submit script of an execution (spec §7.12)."""
    if execution["platform"] != "docker":
        raise CosmosPlanError("render-docker requires a Docker plan")
    if execution["nodes"] != 1:
        raise CosmosPlanError("render-docker supports only single-node plans")
    _check_job_id(job_id, "render-docker")
    if not execution["image"]:
        raise CosmosPlanError("render-docker requires a resolved image")
    ids = execution["host_gpu_ids"]
    if not execution["gpus_per_node"] or not ids:
        raise CosmosPlanError("Docker plan has no resolved GPU allocation")
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise CosmosPlanError("Docker plan host_gpu_ids must be a list of non-empty strings")
    home = f"{execution['container_results_dir'].rstrip('/')}/.tao-runtime/home"
    env = _job_env(execution, job_id)
    env.update(HOME=home, USER="tao", LOGNAME="tao", XDG_CACHE_HOME=f"{home}/.cache", HF_HOME=f"{home}/.cache/huggingface",
               TORCHINDUCTOR_CACHE_DIR=f"{home}/.cache/torchinductor")
    results_host = execution["results_dir"].rstrip("/")
    script = _ENV.get_template("docker_submit.sh.j2").render(
        plan_sha=plan_sha, results_host=results_host, kind=execution["kind"],
        mkdirs=list(dict.fromkeys([*(d.rstrip("/") for d in execution["output_dirs"]), f"{results_host}/{job_id}"])),
        job_id=job_id, gpus="device=" + ",".join(ids), mounts=execution["mounts"], env=sorted(env.items()),
        image=execution["image"], step=execution["step"])
    _bash_check(script)
    return script


def preparation_step(plan: dict, job_id: str, frame: Frame) -> dict | None:
    """Stage the Omni preparation helper under ``<results>/<job>/`` in the frame and return the
    template's ``prep`` block, or ``None`` when the plan needs no conversion (spec §7.9)."""
    preparation = plan["model_preparation"]
    if preparation["kind"] != "cosmos3_omni_to_exact_qwen3_vl":
        return None
    helper = preparation["helper"]
    host_helper = f"{plan['planner_request']['results_dir'].rstrip('/')}/{job_id}/model-preparation/{HELPER_NAME}"
    if frame.write_text(host_helper, helper["text"], mode=0o750) != helper["sha256"]:
        raise CosmosPlanError("model-preparation helper checksum mismatch")
    container_helper = f"{plan['container_paths']['results_dir'].rstrip('/')}/{job_id}/model-preparation/{HELPER_NAME}"
    sqsh = plan["model_preparation_sqsh"] or (plan["image"].get("sqsh") or {}).get("path")
    return {"sqsh": sqsh,
            "command": (f"test \"$(sha256sum {shlex.quote(container_helper)} | cut -d' ' -f1)\" = {helper['sha256']} "
                        f"&& python3 {shlex.quote(container_helper)} && echo {PREPARATION_OK}")}


def render_training_slurm(plan: dict, job_id: str, frame: Frame) -> str:
    """Verify the materialized spec in the frame, stage the Omni helper, render the sbatch script."""
    if plan["decoder_artifact"].get("required") and not plan["decoder_artifact"].get("fingerprint"):
        raise CosmosPlanError("render requires a complete fingerprinted decoder compatibility artifact")
    execution = training_execution(plan)
    _check_job_id(job_id, "render-slurm")
    if execution["platform"] != "slurm":
        raise CosmosPlanError("SLURM script rendering requires platform=slurm")
    verify_materialized(plan, frame)
    return render_slurm(execution, job_id, plan["plan_artifact"]["sha256"], preparation_step(plan, job_id, frame))


def render_training_docker(plan: dict, job_id: str, frame: Frame) -> str:
    execution = training_execution(plan)
    if execution["platform"] != "docker":
        raise CosmosPlanError("render-docker requires a Docker plan")
    verify_materialized(plan, frame)
    return render_docker(execution, job_id, plan["plan_artifact"]["sha256"])
