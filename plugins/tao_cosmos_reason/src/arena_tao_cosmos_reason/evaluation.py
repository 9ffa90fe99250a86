"""The evaluation plan, inherited from a sealed training plan (spec §8.4).

Only ``required_evaluation_intake`` may come from the user; everything else (model, data,
prompt, preprocessing, precision, scoring, image, mounts) is copied from the training plan. An
evaluation is a job of its own: its ``spec_bundle.execution`` has its own results folder (the
supplied ``results_dir``, translated into the container and mounted), and its job identity
(``TAO_JOB_ID``, ``TAO_STATUS_FILE``) is bound when it is rendered with its own
``--tao-job-id``; the training job's identity and results root never reach it.
"""

from __future__ import annotations

import os

from arena_tao_cosmos_reason.container_paths import INPUT, OUTPUT, Access, parse_mount, runtime_mounts, translate
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.render import JOB_IDENTITY, container_step
from arena_tao_cosmos_reason.routing import FRAMEWORK

INHERITED = ("validation_dataset_fingerprint", "annotations", "media_roots", "system_prompt", "frames", "vision",
             "max_video_pixels", "precision", "seed", "batch_size", "task_profile", "metric_coverage")
TRAINING_ONLY_ENV = ("TAO_VIDEO_TRAIN_", "TAO_RESULTS_ROOT", "TAO_API_RESULTS_DIR", "COSMOS_CACHE")
"""Prefixes of training variables an evaluation must not inherit (its own results root replaces them)."""
EVAL_COMMAND = "python3 -m tao_cosmos_eval"
"""The backend's evaluation helper (spec §8.4 names it only in prose; backend-owned)."""


def _max_tokens(raw) -> int | None:
    if raw in (None, ""):
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise CosmosPlanError(f"generation.max_tokens must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise CosmosPlanError(f"generation.max_tokens must be a positive integer, got {raw!r}")
    return value


def _checkpoint(selection: str | None, mounts: list[dict], strict: bool) -> tuple[list, str | None]:
    """``(accesses, container value)`` of ``checkpoint_selection``: a host path (translated, and
    mounted read-only on Docker) or a label such as ``final`` resolved by the evaluator under the
    training checkpoint root."""
    if not selection:
        return [], None
    if "/" not in selection:
        return [], selection
    if not os.path.isabs(os.path.expanduser(selection)):
        raise CosmosPlanError(f"checkpoint_selection must be an absolute host path or a label such as final, "
                              f"got {selection!r}")
    return [Access("checkpoint_selection", selection, INPUT)], translate(selection, mounts, strict, "checkpoint_selection")


def evaluation_plan(training: dict, inputs: dict) -> dict:
    """Build the evaluation plan; ``ready`` is true only when every required input is supplied.

    ``inputs`` may hold ``results_dir`` (a host folder for this evaluation's records),
    ``checkpoint_selection`` (a host path or a label such as ``final``), ``generation.max_tokens``
    (a positive integer), ``task.type`` and ``metrics.names``; any other key is rejected (it would
    override an inherited field).

    Raises:
        CosmosPlanError: an unknown or malformed input (naming it), a ``results_dir`` equal to the
            training job's, or on SLURM a ``results_dir``/checkpoint path no training mount covers.
    """
    if training.get("kind") == "cosmos_evaluation_plan":
        raise CosmosPlanError("evaluate needs the sealed training plan, not an evaluation plan")
    contract = training["evaluation_contract"]
    required = list(contract["required_evaluation_intake"])
    inputs = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in inputs.items()}
    unknown = sorted(set(inputs) - set(required))
    if unknown:
        raise CosmosPlanError(f"evaluation inherits these from the training plan; do not supply them: {unknown} "
                              f"(the evaluation intake is {required})")
    for key, value in inputs.items():
        if value is not None and not isinstance(value, str):
            raise CosmosPlanError(f"evaluation input {key} must be a string, got {type(value).__name__}")
    missing = [k for k in required if inputs.get(k) in (None, "")]
    generation = dict(contract["generation"])
    max_tokens = _max_tokens(inputs.get("generation.max_tokens"))
    if max_tokens is not None:
        generation["max_tokens"] = max_tokens

    req = training["planner_request"]
    platform, strict = req["platform"], req["platform"] == "slurm"
    results = inputs.get("results_dir") or None
    if results:
        if not os.path.isabs(os.path.expanduser(results)):
            raise CosmosPlanError(f"results_dir must be an absolute host path, got {results!r}")
        if os.path.normpath(results) == os.path.normpath(req["results_dir"]):
            raise CosmosPlanError(f"results_dir={results!r} is the training job's results_dir: an evaluation writes "
                                  "its own records into a folder of its own")
    trained_mounts = [parse_mount(m) for m in training["container_mounts"]]
    checkpoint = inputs.get("checkpoint_selection") or None
    accesses, container_checkpoint = _checkpoint(checkpoint, trained_mounts, strict)
    if results:
        accesses.append(Access("results_dir", results, OUTPUT))
    mounts = runtime_mounts(platform, training["container_mounts"], accesses)
    container_results = translate(results, mounts, strict, "results_dir") if results else None

    backend = training["backend"]
    actions = ([{"action": "framework_dcp_export", "checkpoint": checkpoint, "reuse": "only a complete, matching export"},
                {"action": "verify_hf_export"}] if backend == FRAMEWORK else
               [{"action": "cosmos_rl_verify_hf_export", "checkpoint": checkpoint},
                {"action": "re_resolve_with_export_manifest"}])
    environment = {k: v for k, v in training["environment"].items()
                   if k not in JOB_IDENTITY and not k.startswith(TRAINING_ONLY_ENV)}
    checkpoint_root = training["container_paths"]["checkpoint_dir"]
    environment.update(TAO_EVAL_CHECKPOINT=container_checkpoint or "", TAO_EVAL_CHECKPOINT_ROOT=checkpoint_root,
                       TAO_EVAL_MAX_TOKENS=str(generation["max_tokens"] or ""),
                       TAO_EVAL_TEMPERATURE=str(generation["temperature"]))
    if container_results:
        environment.update(TAO_RESULTS_ROOT=container_results, TAO_API_RESULTS_DIR=container_results)
    command = (f"{EVAL_COMMAND} --checkpoint \"$TAO_EVAL_CHECKPOINT\" --checkpoint-root \"$TAO_EVAL_CHECKPOINT_ROOT\" "
               f"--results-dir \"$TAO_RESULTS_ROOT/$TAO_JOB_ID\" --max-tokens \"$TAO_EVAL_MAX_TOKENS\"")
    train_exec_slurm = {key: req[key] for key in ("partition", "account", "qos", "reservation", "exclusive",
                                                  "time_limit", "timeout", "master_port", "use_requeue")}
    results_host = (results or "").rstrip("/")
    execution = {
        "kind": "evaluation",
        "backend": backend,
        "platform": platform,
        "image": training["image"]["tag"],
        "sqsh": training.get("sqsh"),
        "nodes": 1, "gpus_per_node": req["gpus_per_node"], "cpus_per_task": req["cpus_per_task"],
        "host_gpu_ids": training["compute"].get("host_gpu_ids"),
        "slurm": train_exec_slurm | {"exclusive": False,
                                     "stdout": f"{results_host}/slurm-%j.out", "stderr": f"{results_host}/slurm-%j.err",
                                     "exclude": list((training.get("slurm_node_exclusions") or {}).get("validated") or [])},
        "results_dir": results,
        "container_results_dir": container_results,
        "output_dirs": [results] if results else [],
        "mounts": [m["text"] for m in mounts],
        "environment": environment,
        "command": command,
        "step": container_step(training["preflight"]["container_startup"], command),
        "job_identity": "bound at render time from --tao-job-id (TAO_JOB_ID, TAO_API_JOB_ID, TAO_STATUS_FILE)",
    }
    return {
        "schema_version": 1,
        "kind": "cosmos_evaluation_plan",
        "ready": not missing,
        "required_user_inputs": missing,
        "source_plan": {"path": training["plan_artifact"]["path"], "sha256": training["plan_artifact"]["sha256"],
                        "experiment_id": training["experiment_id"], "tao_job_id": req.get("tao_job_id") or None},
        "backend": backend,
        "model": {"fingerprint": training["model"]["fingerprint"], "revision": training["model"]["revision_resolution"]},
        "inherited": {k: contract[k] for k in INHERITED},
        "generation": generation,
        "checkpoint_selection": checkpoint,
        "task_type": inputs.get("task.type"),
        "metric_names": inputs.get("metrics.names"),
        "automated_actions": actions,
        "spec_bundle": {"execution": execution},
    }


def check_evaluation_job(plan: dict, job_id: str) -> None:
    """An evaluation renders only when ready, and never under its training job's identity."""
    if not plan["ready"]:
        raise CosmosPlanError(f"evaluation plan is not ready; supply {plan['required_user_inputs']} with "
                              "evaluate --input KEY=VALUE")
    source = plan["source_plan"]
    taken = {source.get("tao_job_id"), source.get("experiment_id")} - {None}
    if job_id in taken:
        raise CosmosPlanError(f"--tao-job-id {job_id!r} is the training job's identity; an evaluation needs a newly "
                              "opened job record of its own")

