"""``plan``: resolve, inspect once, derive and assemble the plan document (spec §1.3, §5.1).

The order of the steps follows spec §1.3; every failure is a :class:`CosmosPlanError`.
"""

from __future__ import annotations

import copy
import os

from arena_tao_cosmos_reason import SCHEMA_VERSION
from arena_tao_cosmos_reason.compute import docker_gpus, timeout_seconds
from arena_tao_cosmos_reason.container_paths import (INPUT, OUTPUT, Access, access_records, parse_mount, path_identity,
                                                     runtime_mounts, translate)
from arena_tao_cosmos_reason.dataset_inspect import check_splits
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import sha256_bytes, stable_hash
from arena_tao_cosmos_reason.image import resolve_image
from arena_tao_cosmos_reason.inputs import inspect_inputs, inspection_payload
from arena_tao_cosmos_reason.launch_env import command, environment
from arena_tao_cosmos_reason.model_inspect import (check_prepared_checkpoint, choose_base_model_format,
                                                   inspect_target_compute_model, inspect_uri_model, read_config)
from arena_tao_cosmos_reason.model_preparation import model_preparation
from arena_tao_cosmos_reason.model_ref import resolve_model_reference
from arena_tao_cosmos_reason.node_exclusions import node_exclusions
from arena_tao_cosmos_reason.preflight import preflight_contract
from arena_tao_cosmos_reason.remote_inspection import inspect_remote
from arena_tao_cosmos_reason.request import PlanRequest
from arena_tao_cosmos_reason.routing import FRAMEWORK, RL, model_name_for_reference, model_tier, normalize_action, select_backend
from arena_tao_cosmos_reason.sampling import processor_profile, validate_sampling
from arena_tao_cosmos_reason.specs import TRAIN_MANIFEST_PLACEHOLDER, VAL_MANIFEST_PLACEHOLDER, framework_spec, rl_spec
from arena_tao_cosmos_reason.toml_emit import dump_and_check
from arena_tao_cosmos_reason.training import framework_geometry, rl_batch, run_mode_limits, training_contract
from arena_tao_cosmos_reason.video_runtime import (check_flag_hygiene, framework_video_runtime, rl_video_runtime,
                                                   validation_shard_strategy)

FORMAT_HINT = {"qwen3_vl": "nvidia/Cosmos3-Nano", "cosmos3_omni": "nvidia/Cosmos3-Nano", "cosmos3_edge": "nvidia/Cosmos3-Edge"}


def _local_model_type(ref: str) -> str | None:
    if ref and "://" not in ref and os.path.isdir(os.path.expanduser(ref)) and os.path.isfile(os.path.join(ref, "config.json")):
        return read_config(ref).get("model_type")
    return None


def resolve_model_name(req: PlanRequest, remote_model_type: str | None = None) -> str:
    """Spec §3.4: explicit model, else the reference, local config.json, remote inspection."""
    if req.model != "auto":
        model_tier(req.model)
        return req.model
    name = model_name_for_reference(req.base_model_path_or_uri, _local_model_type(req.base_model_path_or_uri) or remote_model_type)
    if name is None:
        raise CosmosPlanError("model tier is ambiguous; supply Cosmos3-Nano/Edge or a recognizable public checkpoint")
    return name


def _check_intake(req: PlanRequest) -> None:
    if normalize_action(req.action) != "train":
        raise CosmosPlanError("this planner currently materializes training; use the backend action contract for non-train actions")
    if not req.base_model_path_or_uri.strip():
        raise CosmosPlanError("base_model_path_or_uri is required for every Cosmos training request")
    if not req.write_spec:
        raise CosmosPlanError("write_spec is required so the submitted config can be fingerprinted")
    if req.platform == "slurm" and not req.results_dir:
        raise CosmosPlanError("SLURM results_dir is required")
    if not (req.results_dir and req.checkpoint_dir and req.cache_dir):
        raise CosmosPlanError("results_dir, checkpoint_dir, and cache_dir are required runtime paths")
    if req.platform == "slurm":
        for name in ("sqsh_cache_dir", "ssh_key_path"):
            if not getattr(req, name) and not (name == "sqsh_cache_dir" and req.sqsh_path):
                raise CosmosPlanError(f"required runtime path is missing: {name}")
        if req.gpus_per_node <= 0:
            raise CosmosPlanError("--gpus-per-node is required when the target platform is not docker")
    if req.use_requeue:
        raise CosmosPlanError("requeue is disabled by default and is not validated for Cosmos training")
    if req.nodes > 1 and req.async_checkpoint:
        raise CosmosPlanError("asynchronous distributed checkpointing is disabled for multi-node Cosmos runs")
    timeout_seconds(req.timeout)


def _inputs_missing_locally(req: PlanRequest) -> bool:
    paths = [req.base_model_path_or_uri, *req.train_annotation, *req.train_media_root, *req.validation_annotation,
             *req.validation_media_root]
    return any(p and "://" not in p and os.path.isabs(os.path.expanduser(p)) and not os.path.exists(os.path.expanduser(p))
               for p in paths)


def _align_container_paths(req: PlanRequest, mounts: list[dict], strict: bool) -> dict:
    """The container's spec/results/checkpoint/cache paths; on SLURM the translations of their
    host paths, which an explicit container path must agree with (spec §3.14)."""
    container = {"spec_path": req.container_spec_path, "results_dir": req.container_results_dir,
                 "checkpoint_dir": req.container_checkpoint_dir, "cache_dir": req.container_cache_dir}
    if not strict:
        return container
    defaults = PlanRequest.model_fields
    for key, field, host_field in (("spec_path", "container_spec_path", "write_spec"),
                                   ("results_dir", "container_results_dir", "results_dir"),
                                   ("checkpoint_dir", "container_checkpoint_dir", "checkpoint_dir"),
                                   ("cache_dir", "container_cache_dir", "cache_dir")):
        host = getattr(req, host_field)
        mapped = translate(host, mounts, strict=True, field=host_field)
        given = getattr(req, field)
        if given != defaults[field].default and given != mapped:
            raise CosmosPlanError(f"{field}={given!r} does not match the explicit mount mapping for {host}")
        container[key] = mapped
    return container


def container_accesses(req: PlanRequest, train: dict, validation: dict, model_local: bool) -> list[Access]:
    """Every host path the training container reads or writes (see :mod:`container_paths`)."""
    accesses = [Access("results_dir", req.results_dir, OUTPUT), Access("checkpoint_dir", req.checkpoint_dir, OUTPUT),
                Access("cache_dir", req.cache_dir, OUTPUT), Access("write_spec", req.write_spec, INPUT)]
    if model_local:
        accesses.append(Access("base_model_path_or_uri", req.base_model_path_or_uri, INPUT))
    for field in ("prepared_checkpoint_path", "vlm_architecture_model_path_or_uri", "video_override_map",
                  "video_override_manifest"):
        value = getattr(req, field)
        expanded = os.path.expanduser(value)
        if value and "://" not in value and (os.path.isabs(expanded) or os.path.exists(expanded)):
            accesses.append(Access(field, value, INPUT))
    for split, report in (("train", train), ("validation", validation)):
        accesses += [Access(f"{split}_annotation", p, INPUT) for p in getattr(req, f"{split}_annotation")]
        accesses += [Access(f"{split}_media_root", p, INPUT) for p in getattr(req, f"{split}_media_root")]
        accesses += [Access(f"{split}_annotation", d, INPUT, same_path=True) for d in report.get("absolute_media_dirs", [])]
    return accesses


# -- the steps of build_plan, in its order --------------------------------------------------
def _host_gpus(req: PlanRequest, env) -> tuple[PlanRequest, list[str] | None]:
    """Docker: the host GPUs the container gets (discovered when ``gpus_per_node`` is 0 or
    ``CUDA_VISIBLE_DEVICES`` is set; the request's count follows them). Elsewhere ``None``."""
    if req.platform == "docker" and (req.gpus_per_node <= 0 or env.get("CUDA_VISIBLE_DEVICES") is not None):
        host_gpu_ids = docker_gpus(req.gpus_per_node, env)
        return req.model_copy(update={"gpus_per_node": len(host_gpu_ids)}), host_gpu_ids
    if req.platform == "docker":
        return req, [str(i) for i in range(req.gpus_per_node)]
    return req, None


def _preliminary_backend(req: PlanRequest) -> str:
    """The backend chosen from the request alone (the model's name, or the format's hint),
    before anything is inspected; checked again by :func:`_final_backend`.

    Raises:
        CosmosPlanError: no model name can be found, or Cosmos3-Edge outside Cosmos Framework.
    """
    try:
        model_name = resolve_model_name(req)
    except CosmosPlanError:
        if req.base_model_format not in FORMAT_HINT:
            raise
        model_name = FORMAT_HINT[req.base_model_format]
    selection = select_backend(model_name, req.action, req.backend, req.workload, req.comparative)
    if selection.tier == "edge" and selection.backend != FRAMEWORK:
        raise CosmosPlanError("Cosmos3-Edge training requires Cosmos Framework")
    return selection.backend


def _resolve_revision(req: PlanRequest, resolver, reuse: dict | None) -> tuple[PlanRequest, dict]:
    """The base model's revision (a prior plan's when reused); the request records it."""
    if reuse:
        revision = reuse["model"]["revision_resolution"]
    else:
        revision = resolve_model_reference(req.base_model_path_or_uri, req.base_model_revision, resolver)
    if revision["resolved_revision"]:
        req = req.model_copy(update={"base_model_revision": revision["resolved_revision"]})
    return req, revision


def _inspect(req: PlanRequest, revision: dict, transport, reuse: dict | None) -> tuple[dict, dict, dict, dict, bool]:
    """The one inspection of the inputs (a prior plan's, over SSH on the cluster when they are
    not here, else on this host): ``(model, train, validation, input frame, model is local)``."""
    model_local = revision["kind"] in ("local_snapshot", "target_compute_local_snapshot")
    if reuse:
        inspection = {"model": reuse["model"], "datasets": reuse["datasets"]}
        frame = reuse["input_frame"]
    elif req.platform == "slurm" and _inputs_missing_locally(req):
        inspection = inspect_remote(req, inspection_payload(req, model_local), transport)
        frame = {"kind": "slurm_remote", "verified_host": inspection["verified_host"],
                 "inspection_transport": "repository_helper_streamed_over_ssh"}
    else:
        inspection = inspect_inputs(inspection_payload(req, revision["kind"] == "local_snapshot"))
        frame = {"kind": "submission_host", "verified_host": None, "inspection_transport": "local_filesystem"}
    model = inspection["model"]
    if model is None:
        model = (inspect_target_compute_model(req.base_model_path_or_uri) if revision["kind"] == "target_compute_local_snapshot"
                 else inspect_uri_model(revision["repo_id"], revision["resolved_revision"]))
    model = dict(model, revision_resolution=revision)
    return model, inspection["datasets"]["train"], inspection["datasets"]["validation"], frame, model_local


def _final_backend(req: PlanRequest, model: dict, backend: str):
    """The backend chosen again with the inspected model type: ``(selection, model name, local
    model type)``.

    Raises:
        CosmosPlanError: it differs from the preliminary one.
    """
    local_type = model["config"].get("model_type") if model["kind"] == "local" else None
    final_name = resolve_model_name(req, local_type) if req.model == "auto" else req.model
    final = select_backend(final_name, req.action, req.backend, req.workload, req.comparative)
    if final.backend != backend:
        raise CosmosPlanError("backend changed after input inspection")
    return final, final_name, local_type


def _align_paths(req: PlanRequest, train: dict, validation: dict, model_local: bool):
    """Path alignment: what the container sees, and the mounts that make it so. What is sealed
    is what runs (spec §0.2, §5.3): the returned request records the resolved values.
    Returns ``(request, container paths, accesses, mounts)``."""
    stdout = req.stdout_path or os.path.join(req.results_dir, "slurm-%j.out")
    stderr = req.stderr_path or os.path.join(req.results_dir, "slurm-%j.err")
    strict = req.platform == "slurm"
    container = _align_container_paths(req, [parse_mount(m) for m in req.container_mount], strict)
    accesses = container_accesses(req, train, validation, model_local)
    docker_defaults = [("results_dir", req.results_dir, container["results_dir"], False),
                       ("checkpoint_dir", req.checkpoint_dir, container["checkpoint_dir"], False),
                       ("cache_dir", req.cache_dir, container["cache_dir"], False),
                       ("write_spec", os.path.dirname(os.path.abspath(req.write_spec)),
                        os.path.dirname(container["spec_path"]), True)]
    mounts = runtime_mounts(req.platform, req.container_mount, accesses, docker_defaults)
    req = req.model_copy(update={"container_spec_path": container["spec_path"],
                                 "container_results_dir": container["results_dir"],
                                 "container_checkpoint_dir": container["checkpoint_dir"],
                                 "container_cache_dir": container["cache_dir"],
                                 "container_mount": [m["text"] for m in mounts],
                                 "stdout_path": stdout, "stderr_path": stderr})
    return req, container, accesses, mounts


def _check_datasets(req: PlanRequest, backend: str, train: dict, validation: dict, total_gpus: int) -> None:
    """The splits fit the GPUs; Cosmos-RL merging annotations needs one shared media root.

    Raises:
        CosmosPlanError: they do not.
    """
    check_splits(train, validation, total_gpus)
    if backend == RL:
        for split in ("train", "validation"):
            roots = getattr(req, f"{split}_media_root")
            if len(getattr(req, f"{split}_annotation")) > 1 and len(roots) != 1:
                raise CosmosPlanError("Cosmos-RL requires one explicit shared media root per split when annotations are "
                                      f"merged: {split}_media_root has {len(roots)} entries")


def _wire_data(req: PlanRequest, backend: str, family: str, train: dict, validation: dict, selected: dict,
               mounts: list) -> tuple[dict, list[dict]]:
    """The data as the container sees it, and the manifests to generate (a smoke run's sample
    limit, Cosmos-RL's merged annotations): ``(container data, manifests)``."""
    strict = req.platform == "slurm"
    spec_dir = os.path.dirname(os.path.abspath(req.write_spec))
    manifests = []
    data = {}
    for split, report in (("train", train), ("validation", validation)):
        anns = [translate(a, mounts, strict, f"{split}_annotation") for a in getattr(req, f"{split}_annotation")]
        roots = [translate(r, mounts, strict, f"{split}_media_root") for r in getattr(req, f"{split}_media_root")]
        if len(roots) == 1 and len(anns) > 1:
            roots = roots * len(anns)
        limit = selected["limits"].get(split)
        needs = limit is not None or (backend == RL and len(anns) > 1)
        if needs:
            suffix = "smoke" if req.run_mode != "full" else "merged"
            output = os.path.join(spec_dir, f"{split}_{suffix}.json")
            manifests.append({"split": split, "output": output, "container": translate(output, mounts, strict, "write_spec"),
                              "sample_limit": limit, "dataset_family": family, "selected_tasks": report["selected_tasks"],
                              "sources": getattr(req, f"{split}_annotation"), "records": report.get("_records", [])})
        data[f"{split}_annotations"] = anns
        data[f"{split}_media_roots"] = roots
        placeholder = TRAIN_MANIFEST_PLACEHOLDER if split == "train" else VAL_MANIFEST_PLACEHOLDER
        data[f"{split}_annotation"] = placeholder if needs else anns[0]
        data[f"{split}_media_root"] = roots[0]
    if backend == FRAMEWORK and manifests:
        for m in manifests:
            data[f"{m['split']}_annotations"] = [m["container"]]
    return data, manifests


def build_plan(req: PlanRequest, resolver=None, transport=None, env=None, reuse: dict | None = None) -> dict:
    """Build the unsealed plan for a training request, in named steps: intake, host GPUs, a
    preliminary backend, the model's revision, the one inspection of the inputs, the final
    backend, path alignment, model preparation, dataset checks, the training contract and
    runtime, data wiring, the rendered spec, then the plan record.

    Args:
        resolver: Hub revision resolver (default :class:`~.model_ref.HubRevisionResolver`).
        transport: SSH transport for remote inspection (default real ``ssh``).
        env: process environment for Docker GPU discovery (default ``os.environ``).
        reuse: a prior plan whose inspection is reused (``retry-plan``); nothing is re-read.
    """
    env = os.environ if env is None else env
    req = req.with_experiment_id()
    _check_intake(req)
    req, host_gpu_ids = _host_gpus(req, env)
    total_gpus = req.nodes * req.gpus_per_node
    backend = _preliminary_backend(req)
    image = resolve_image(req, backend)
    req, revision = _resolve_revision(req, resolver, reuse)
    model, train, validation, frame, model_local = _inspect(req, revision, transport, reuse)
    exclusions = node_exclusions(req.exclude_node, req.exclude_unhealthy_inventory_nodes,
                                 req.slurm_node_inventory_file, req.partition) if req.platform == "slurm" else None
    final, model_name, local_type = _final_backend(req, model, backend)
    tier = final.tier
    selected = run_mode_limits(req, train["record_count"], validation["record_count"], total_gpus)
    req, container, accesses, mounts = _align_paths(req, train, validation, model_local)
    strict = req.platform == "slurm"

    # model checks and preparation
    fmt, fmt_source = choose_base_model_format(tier, req.base_model_format, local_type)
    prepared_explicit = check_prepared_checkpoint(req.prepared_checkpoint_path, tier) if req.prepared_checkpoint_path else None
    preparation = model_preparation(req, tier, backend, fmt, model, revision, mounts, strict, container, resolver,
                                    prepared_explicit, reuse)

    _check_datasets(req, backend, train, validation, total_gpus)
    family = train["dataset_family"]

    validate_sampling(req, backend)
    profile = processor_profile(req, tier, train, validation)
    if backend == RL and tier == "nano" and profile["profile"]["sequence_length"] < 40960:
        raise CosmosPlanError("Cosmos-RL Nano needs sequence_length >= 40960")
    contract = training_contract(req, family, profile, selected)
    check_flag_hygiene(req, backend)
    shard = validation_shard_strategy(req, family, validation)
    geometry = framework_geometry(req, tier, contract, shard) if backend == FRAMEWORK else None
    batch = rl_batch(req) if backend == RL else None
    runtime_type = preparation["runtime_model_type"]
    video_rt = (framework_video_runtime(req, family, validation, shard, runtime_type) if backend == FRAMEWORK
                else rl_video_runtime(req, family, train, validation, shard))
    decoder_artifact = {"enabled": bool(req.video_override_map), "required": False,
                        "map": req.video_override_map or None, "manifest": req.video_override_manifest or None,
                        "fingerprint": req.video_override_fingerprint or None,
                        "container_map": translate(req.video_override_map, mounts, strict, "video_override_map") or None,
                        "container_manifest": translate(req.video_override_manifest, mounts, strict,
                                                        "video_override_manifest") or None}

    processor_fp = stable_hash({"processor_revision": revision.get("resolved_revision"), "profile": profile["profile"],
                                "decoder_artifact": decoder_artifact,
                                "rl_video_runtime": video_rt if backend == RL else None,
                                "framework_video_runtime": video_rt if backend == FRAMEWORK else None})
    cache_keys = {split: sha256_bytes(f"dataset={d['dataset_fingerprint']}\nmodel={model['fingerprint']}\n"
                                      f"processor={processor_fp}\n".encode())
                  for split, d in (("train", train), ("validation", validation))}

    data, manifests = _wire_data(req, backend, family, train, validation, selected, mounts)

    ctx = {"req": req, "tier": tier, "backend": backend, "family": family, "contract": contract, "geometry": geometry,
           "rl_batch": batch, "profile": profile, "video_runtime": video_rt, "container": container,
           "container_data": data, "prepared_model_container_path": preparation["container_path"],
           "cache_keys": cache_keys, "selected": selected, "image": image, "decoder_artifact": decoder_artifact}
    spec = framework_spec(ctx) if backend == FRAMEWORK else rl_spec(ctx)
    if backend == RL:
        spec = _replace_placeholders(spec, {m["split"]: m["container"] for m in manifests})
    job_id = req.tao_job_id or req.experiment_id
    env_vars = environment(ctx, job_id)
    ctx["environment"] = env_vars
    dump_and_check(spec)

    training = dict(contract)
    if geometry:
        training.update(per_forward_batch=geometry["per_forward_batch"], gradient_accumulation=geometry["gradient_accumulation"],
                        steps_per_epoch=geometry["steps_per_epoch"], warmup_rounding=geometry["warmup_rounding"])
    if batch:
        training.update(rl_batch=batch)
    val_cov = validation["metric_coverage"]
    plan = {
        "schema_version": SCHEMA_VERSION,
        "experiment_id": req.experiment_id,
        "model_name": model_name,
        "tier": tier,
        "action": "train",
        "workflow": req.workload,
        "dataset_family": family,
        "backend": backend,
        "backend_selection_reason": final.backend_selection_reason,
        "backend_contract": final.backend_contract,
        "run_mode": req.run_mode,
        "base_model_format": {"value": fmt, "selection_source": fmt_source},
        "model": model,
        "model_preparation": preparation["record"],
        "prepared_model_container_path": preparation["container_path"],
        "training": training,
        "processor_profile": profile["profile"],
        "decoder_artifact": decoder_artifact,
        "rl_video_runtime": video_rt if backend == RL else None,
        "framework_video_runtime": video_rt if backend == FRAMEWORK else None,
        "datasets": {"train": _public(train), "validation": _public(validation)},
        "input_frame": frame,
        "paths": {k: path_identity(getattr(req, k)) for k in ("results_dir", "checkpoint_dir", "cache_dir",
                                                            "sqsh_cache_dir", "ssh_key_path", "write_spec")}
        | {"base_model": path_identity(req.base_model_path_or_uri) if model_local else {"original": req.base_model_path_or_uri}},
        "container_paths": container,
        "container_mounts": [m["text"] for m in mounts],
        "container_access": access_records(accesses, mounts, strict),
        "image": image,
        "sqsh": (image.get("sqsh") or {}).get("path"),
        "model_preparation_sqsh": (image.get("sqsh") or {}).get("path") if preparation["record"]["required"] else None,
        "compute": {"platform": req.platform, "nodes": req.nodes, "gpus_per_node": req.gpus_per_node,
                    "total_gpus": total_gpus, "cpus_per_task": req.cpus_per_task, "host_gpu_ids": host_gpu_ids},
        "slurm_node_exclusions": exclusions,
        "slurm_logs": {"stdout": req.stdout_path, "stderr": req.stderr_path},
        "cache_prewarm": {"enabled": req.rl_dataset_cache_mode == "prewarm" and backend == RL and req.run_mode == "full",
                          "cache_keys": cache_keys},
        "fingerprints": {"model": model["fingerprint"], "train": train["dataset_fingerprint"],
                         "validation": validation["dataset_fingerprint"], "processor": processor_fp, "cache_keys": cache_keys},
        "spec": spec,
        "environment": env_vars,
        "command": command(ctx),
        "config_container_path": container["spec_path"],
        "generated_manifests": manifests,
        "evaluation_contract": {
            "schema_version": 1, "source": "sealed_training_plan",
            "validation_dataset_fingerprint": validation["dataset_fingerprint"],
            "annotations": list(req.validation_annotation), "media_roots": list(req.validation_media_root),
            "system_prompt": contract["system_prompt"], "frames": contract["frames"], "vision": contract["vision"],
            "max_video_pixels": profile["max_pixels"], "precision": contract["precision"], "seed": contract["seed"],
            "batch_size": req.validation_batch_size, "task_profile": validation["evaluation_profile"],
            "metric_coverage": val_cov,
            "generation": {"max_tokens": None, "temperature": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                           "frequency_penalty": 0.0},
            "checkpoint_selection": None,
            "required_evaluation_intake": ["results_dir", "checkpoint_selection", "generation.max_tokens",
                                           *validation["evaluation_profile"]["requires_user_input"]],
        },
        "diagnostic_subset": {"policy": "opt_in_only", "limits": selected["limits"]},
        "first_update_gate": ({"enabled": True, "components": ["vision_encoder", "vision_projector", "language_model", "lm_head"],
                               "status_keys": [f"model/components/{c}/grad_norm" for c in
                                               ("vision_encoder", "vision_projector", "language_model", "lm_head")]
                               + ["model/components/visual_gradient_contract"]} if backend == RL else None),
        "metric_contract": {
            "train": {"key": "train/avg_loss", "weighting": "valid_label_tokens",
                      "companions": ["train/loss_numerator", "train/valid_label_count"]},
            "validation": {"key": "val/avg_loss", "weighting": "valid_label_tokens",
                           "companions": ["val/loss_numerator", "val/valid_label_count"]},
            "accuracy": {"source": "shared repository evaluator", "weighting": "example_weighted_over_accuracy_defined_tasks",
                         "coverage": val_cov},
        },
        "timeout_seconds": timeout_seconds(req.timeout),
        "config": None,
        "generated_artifacts": [],
        "_request": req.captured(),
    }
    plan["preflight"] = preflight_contract(ctx)
    return plan


def _public(report: dict) -> dict:
    return {k: copy.deepcopy(v) for k, v in report.items() if not k.startswith("_")}


def _replace_placeholders(tree, mapping: dict):
    if isinstance(tree, dict):
        return {k: _replace_placeholders(v, mapping) for k, v in tree.items()}
    if tree == TRAIN_MANIFEST_PLACEHOLDER and "train" in mapping:
        return mapping["train"]
    if tree == VAL_MANIFEST_PLACEHOLDER and "validation" in mapping:
        return mapping["validation"]
    return tree
