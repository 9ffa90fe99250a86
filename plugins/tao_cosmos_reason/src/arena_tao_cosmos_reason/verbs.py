"""One function per CLI verb: load/verify the sealed plan, call the owning module, reseal.

Every verb after ``plan`` takes the artifact path; the sealed ``planner_request`` is
authoritative and only ``tao_job_id`` (and output options) come from the invocation. Path
arguments (and path fields of a request) may be ``str`` or ``os.PathLike``; they are stored as
``str``. Every error is a :class:`~.errors.CosmosPlanError` naming the field or file it is about.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from arena_tao_cosmos_reason import artifact
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.evaluation import check_evaluation_job, evaluation_plan
from arena_tao_cosmos_reason.frame_files import LocalFrame, frame_for
from arena_tao_cosmos_reason.hashing import atomic_write_text, pretty_json, sha256_bytes, stable_hash
from arena_tao_cosmos_reason.job_metadata import finalize_metadata, initial_metadata, validate_metadata
from arena_tao_cosmos_reason.metrics import extract_metrics, read_status_file
from arena_tao_cosmos_reason.parity import parity
from arena_tao_cosmos_reason.planner import build_plan, resolve_model_name
from arena_tao_cosmos_reason.preflight import run_preflight
from arena_tao_cosmos_reason.render import (materialize, render_docker, render_slurm, render_training_docker,
                                            render_training_slurm)
from arena_tao_cosmos_reason.request import PlanRequest
from arena_tao_cosmos_reason.routing import BACKEND_ACTIONS, select_backend

PathArg = str | os.PathLike


def _path(value: PathArg | None) -> str | None:
    """Path arguments of the Python API: ``str`` or ``os.PathLike``, stored as ``str``."""
    return None if value is None else os.fspath(value)


def _read_json(path: PathArg, what: str):
    """Parse a JSON file, naming ``what`` and the file in every error."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CosmosPlanError(f"cannot read {what} {os.fspath(path)}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CosmosPlanError(f"{what} {os.fspath(path)} is not valid JSON: {exc}") from None


def resolve(fields: dict) -> dict:
    req = PlanRequest(**fields)
    name = resolve_model_name(req)
    sel = select_backend(name, req.action, req.backend, req.workload, req.comparative)
    return {"schema_version": 2, "model": sel.model, "tier": sel.tier, "backend": sel.backend,
            "backend_selection_reason": sel.backend_selection_reason, "backend_contract": sel.backend_contract}


def plan(fields: dict, plan_artifact: PathArg, resolver=None, transport=None) -> dict:
    """Build the plan, write the spec when its frame is the controller (a remote frame's spec is
    written by ``materialize``), attach the initial metadata, seal and save."""
    plan_artifact = _path(plan_artifact)
    artifact.resolved_path(plan_artifact)  # reject non-local paths before any inspection
    doc = build_plan(PlanRequest(**fields), resolver=resolver, transport=transport)
    doc["planner_request"] = doc.pop("_request")
    artifact.check_no_credentials(doc)  # before the spec, which carries request text, is written
    if doc["input_frame"]["kind"] == "submission_host":
        materialize(doc, LocalFrame())
    meta = initial_metadata(doc, doc["planner_request"].get("tao_job_id"))
    validate_metadata(meta)
    doc["initial_metadata"] = meta
    return artifact.save(doc, plan_artifact)


def _load(plan_artifact: PathArg, tao_job_id: str | None = None) -> dict:
    doc = artifact.load(_path(plan_artifact))
    if tao_job_id:
        doc["planner_request"]["tao_job_id"] = tao_job_id
    return doc


def preflight(plan_artifact: PathArg) -> dict:
    doc = _load(plan_artifact)
    return run_preflight(doc, frame_for(doc))


def materialize_verb(plan_artifact: PathArg) -> dict:
    """Write the spec and generated manifests into the plan's compute frame, then reseal."""
    doc = _load(plan_artifact)
    if doc.get("kind") == "cosmos_evaluation_plan":
        raise CosmosPlanError("an evaluation plan has nothing to materialize; render it with render-slurm or "
                              "render-docker and a new --tao-job-id")
    result = materialize(doc, frame_for(doc))
    sealed = artifact.save(doc, _path(plan_artifact))
    return result | {"approved_plan": sealed["plan_artifact"]}


def _render(kind: str, plan_artifact: PathArg, tao_job_id: str | None, render_output: PathArg | None,
            metadata_output: PathArg | None = None):
    if not tao_job_id:
        raise CosmosPlanError(f"render-{kind} requires --tao-job-id from a newly opened job record")
    plan_artifact, render_output = _path(plan_artifact), _path(render_output)
    doc = _load(plan_artifact, tao_job_id)
    evaluation = doc.get("kind") == "cosmos_evaluation_plan"
    if metadata_output and evaluation:
        raise CosmosPlanError("--metadata-output writes a training job's metadata record; an evaluation plan has none")
    if evaluation:
        check_evaluation_job(doc, tao_job_id)
        execution, sha = doc["spec_bundle"]["execution"], doc["plan_artifact"]["sha256"]
        script = render_slurm(execution, tao_job_id, sha) if kind == "slurm" else render_docker(execution, tao_job_id, sha)
    elif kind == "slurm":
        script = render_training_slurm(doc, tao_job_id, frame_for(doc))
    else:
        script = render_training_docker(doc, tao_job_id, frame_for(doc))
    sealed = artifact.save(doc, plan_artifact)
    if metadata_output:  # the job record's PENDING metadata, for finalize-metadata after the job (spec §9)
        meta = initial_metadata(doc, tao_job_id)
        validate_metadata(meta)
        atomic_write_text(_path(metadata_output), pretty_json(meta))
    if not render_output:
        return script
    atomic_write_text(render_output, script, mode=0o750)
    result = {"ok": True, "output": render_output, "sha256": sha256_bytes(script.encode()),
              "approved_plan": sealed["plan_artifact"], "metadata": _path(metadata_output)}
    if kind == "slurm":
        result["node_exclusions"] = doc.get("slurm_node_exclusions")
    return result


def render_slurm_verb(plan_artifact: PathArg, tao_job_id: str | None, render_output: PathArg | None = None,
                      metadata_output: PathArg | None = None):
    return _render("slurm", plan_artifact, tao_job_id, render_output, metadata_output)


def render_docker_verb(plan_artifact: PathArg, tao_job_id: str | None, render_output: PathArg | None = None,
                       metadata_output: PathArg | None = None):
    return _render("docker", plan_artifact, tao_job_id, render_output, metadata_output)


def parity_verb(first: PathArg, second: PathArg) -> dict:
    report = parity(artifact.load(_path(first)), artifact.load(_path(second)))
    if not report["launch_allowed"]:
        raise CosmosPlanError(f"paired launch blocked by invalid mismatches: {report['invalid_mismatches']}")
    return report


def retry_plan(prior_plan: PathArg, job_id: str, write_spec: PathArg, container_spec_path: str,
               exclude_node: list[str], replace_node_exclusions: bool, slurm_node_inventory: PathArg,
               output: PathArg) -> dict:
    """Reseal a prior SLURM plan under a new job identity and action root (spec §7.10); the spec
    is written into the prior plan's compute frame (over ssh for a remote frame)."""
    prior_plan, write_spec, output = _path(prior_plan), _path(write_spec), _path(output)
    slurm_node_inventory = _path(slurm_node_inventory) or ""
    prior = artifact.load(prior_plan)
    if prior.get("action") != "train" or prior.get("backend") not in BACKEND_ACTIONS:
        raise CosmosPlanError("retry preparation requires a sealed Cosmos training plan")
    if not prior.get("input_frame", {}).get("verified_host"):
        raise CosmosPlanError("prior plan has no verified SLURM inspection host")
    host_spec, cont_spec = Path(write_spec), PurePosixPath(container_spec_path)
    if host_spec.parent.name != "config" or cont_spec.parent.name != "config":
        raise CosmosPlanError("write_spec and container_spec_path must use the record-owned <action-root>/config/<spec> layout")
    root, croot = host_spec.parent.parent, cont_spec.parent.parent
    inherited = list((prior.get("slurm_node_exclusions") or {}).get("validated") or [])
    nodes = list(exclude_node) if replace_node_exclusions else list(dict.fromkeys(inherited + list(exclude_node)))
    fields = dict(prior["planner_request"])
    fields.update(experiment_id=job_id, tao_job_id=job_id, write_spec=str(host_spec), container_spec_path=str(cont_spec),
                  results_dir=str(root / "results"), checkpoint_dir=str(root / "checkpoints"), cache_dir=str(root / "cache"),
                  container_results_dir=str(croot / "results"), container_checkpoint_dir=str(croot / "checkpoints"),
                  container_cache_dir=str(croot / "cache"), stdout_path=str(root / "logs" / "%x-%j.out"),
                  stderr_path=str(root / "logs" / "%x-%j.err"), exclude_node=nodes,
                  exclude_unhealthy_inventory_nodes=True, slurm_node_inventory_file=slurm_node_inventory)
    doc = build_plan(PlanRequest(**fields), reuse=prior)
    doc["planner_request"] = doc.pop("_request")
    materialize(doc, frame_for(doc))
    meta = initial_metadata(doc, job_id)
    validate_metadata(meta)
    doc["initial_metadata"] = meta
    doc["retry_preparation"] = {"retry_of_plan": prior["plan_artifact"]["path"],
                                "retry_of_plan_sha256": prior["plan_artifact"]["sha256"], "inspection_reused": True,
                                "attempt_root": str(root), "container_attempt_root": str(croot),
                                "node_exclusions": doc["slurm_node_exclusions"], "inherited_node_exclusions": inherited}
    artifact.save(doc, output)
    return {"schema_version": 1, "job_id": job_id, "backend": doc["backend"], "output": output,
            "config": doc["config"], "node_exclusions": doc["slurm_node_exclusions"]}


def verify_provenance(plan_artifact: PathArg, provenance_path: PathArg) -> dict:
    doc = artifact.load(_path(plan_artifact))
    build = doc["image"].get("source_build")
    if doc["image"]["mode"] != "source-build" or not build:
        raise CosmosPlanError("verify-provenance applies only to the source-build image mode")
    provenance = _read_json(provenance_path, "image provenance")
    if not isinstance(provenance, dict):
        raise CosmosPlanError(f"image provenance {os.fspath(provenance_path)} must be a JSON object")
    repos = provenance.get("repositories") or {}
    entry = repos.get(build["source_repository"]) if isinstance(repos, dict) else None
    entry = entry if isinstance(entry, dict) else {}
    problems = [f"{key}: expected {build[f'source_{key}']}, found {entry.get(key)}"
                for key in ("commit", "tree") if entry.get(key) != build[f"source_{key}"]]
    if entry.get("dirty"):
        problems.append("source tree is dirty")
    return {"ok": not problems, "errors": problems, "source_manifest_sha256": stable_hash(provenance)}


def extract_metrics_verb(status_file: PathArg, evaluator_file: PathArg | None, plan_artifact: PathArg | None,
                         require_complete: bool) -> dict:
    records = read_status_file(_path(status_file))
    evaluator = _read_json(evaluator_file, "evaluator result") if evaluator_file else None
    coverage = artifact.load(_path(plan_artifact))["evaluation_contract"]["metric_coverage"] if plan_artifact else None
    source = f"evaluator result {_path(evaluator_file)}" if evaluator_file else "evaluator result"
    return extract_metrics(records, evaluator, coverage, require_complete, evaluator_source=source)


def validate_metadata_verb(metadata: PathArg) -> dict:
    record = _read_json(metadata, "job metadata")
    try:
        return validate_metadata(record)
    except CosmosPlanError as exc:
        raise CosmosPlanError(f"{os.fspath(metadata)}: {exc}") from None


def finalize_metadata_verb(metadata: PathArg, child_exit_file: PathArg, status_file: PathArg, scheduler_state: str,
                           scheduler_reason: str | None = None, scheduler_exit_code: str | None = None,
                           allocated_nodes: list[str] | None = None, job_id: str | None = None,
                           evaluator_file: PathArg | None = None, strict_completion: bool = False) -> dict:
    evaluator = _read_json(evaluator_file, "evaluator result") if evaluator_file else None
    return finalize_metadata(_path(metadata), _path(child_exit_file), _path(status_file), scheduler_state,
                             scheduler_reason, scheduler_exit_code, allocated_nodes, job_id, evaluator, strict_completion,
                             evaluator_source=f"evaluator result {_path(evaluator_file)}")


def evaluate(plan_artifact: PathArg, inputs: dict, output: PathArg | None) -> dict:
    """The evaluation plan of a sealed training plan; sealed at ``output`` when given, ready to be
    rendered with ``render-slurm``/``render-docker`` and a new ``--tao-job-id``."""
    inputs = {key: _path(value) if isinstance(value, os.PathLike) else value for key, value in inputs.items()}
    doc = evaluation_plan(artifact.load(_path(plan_artifact)), inputs)
    if output:
        doc = artifact.save(doc | {"planner_request": {"evaluation_inputs": inputs, "tao_job_id": ""}}, _path(output))
    return {"ok": doc["ready"], **doc}

