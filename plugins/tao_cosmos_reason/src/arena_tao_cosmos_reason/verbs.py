"""One function per CLI verb: load/verify the sealed plan, call the owning module, reseal.

Every verb after ``plan`` takes the artifact path; the sealed ``planner_request`` is
authoritative and only ``tao_job_id`` (and output options) come from the invocation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from arena_tao_cosmos_reason import artifact
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.evaluation import evaluation_plan
from arena_tao_cosmos_reason.hashing import atomic_write_text, pretty_json, sha256_bytes, stable_hash
from arena_tao_cosmos_reason.job_metadata import initial_metadata, validate_metadata
from arena_tao_cosmos_reason.metrics import extract_metrics, parse_status_text
from arena_tao_cosmos_reason.parity import parity
from arena_tao_cosmos_reason.planner import build_plan, resolve_model_name
from arena_tao_cosmos_reason.preflight import run_preflight
from arena_tao_cosmos_reason.render import materialize, render_docker, render_slurm, spec_text
from arena_tao_cosmos_reason.request import PlanRequest
from arena_tao_cosmos_reason.routing import BACKEND_ACTIONS, select_backend


def resolve(fields: dict) -> dict:
    req = PlanRequest(**fields)
    name = resolve_model_name(req)
    sel = select_backend(name, req.action, req.backend, req.workload, req.comparative)
    return {"schema_version": 2, "model": sel.model, "tier": sel.tier, "backend": sel.backend,
            "backend_selection_reason": sel.backend_selection_reason, "backend_contract": sel.backend_contract}


def plan(fields: dict, plan_artifact: str, resolver=None, transport=None) -> dict:
    """Build, write the local spec (local frame), attach initial metadata, seal and save."""
    artifact.resolved_path(plan_artifact)  # reject non-local paths before any inspection
    doc = build_plan(PlanRequest(**fields), resolver=resolver, transport=transport)
    doc["planner_request"] = doc.pop("_request")
    if doc["input_frame"]["kind"] == "submission_host":
        materialize(doc)
    meta = initial_metadata(doc, doc["planner_request"].get("tao_job_id"))
    validate_metadata(meta)
    doc["initial_metadata"] = meta
    return artifact.save(doc, plan_artifact)


def _load(plan_artifact: str, tao_job_id: str | None = None) -> dict:
    doc = artifact.load(plan_artifact)
    if tao_job_id:
        doc["planner_request"]["tao_job_id"] = tao_job_id
    return doc


def preflight(plan_artifact: str) -> dict:
    return run_preflight(_load(plan_artifact))


def materialize_verb(plan_artifact: str) -> dict:
    doc = _load(plan_artifact)
    result = materialize(doc)
    sealed = artifact.save(doc, plan_artifact)
    return result | {"approved_plan": sealed["plan_artifact"]}


def _render(kind: str, plan_artifact: str, tao_job_id: str | None, render_output: str | None):
    if not tao_job_id:
        raise CosmosPlanError(f"render-{kind} requires --tao-job-id from a newly opened job record")
    doc = _load(plan_artifact, tao_job_id)
    script = render_slurm(doc, tao_job_id) if kind == "slurm" else render_docker(doc, tao_job_id)
    sealed = artifact.save(doc, plan_artifact)
    if not render_output:
        return script
    atomic_write_text(render_output, script, mode=0o750)
    result = {"ok": True, "output": str(render_output), "sha256": sha256_bytes(script.encode()),
              "approved_plan": sealed["plan_artifact"]}
    if kind == "slurm":
        result["node_exclusions"] = doc.get("slurm_node_exclusions")
    return result


def render_slurm_verb(plan_artifact, tao_job_id, render_output=None):
    return _render("slurm", plan_artifact, tao_job_id, render_output)


def render_docker_verb(plan_artifact, tao_job_id, render_output=None):
    return _render("docker", plan_artifact, tao_job_id, render_output)


def parity_verb(first: str, second: str) -> dict:
    report = parity(artifact.load(first), artifact.load(second))
    if not report["launch_allowed"]:
        raise CosmosPlanError(f"paired launch blocked by invalid mismatches: {report['invalid_mismatches']}")
    return report


def retry_plan(prior_plan: str, job_id: str, write_spec: str, container_spec_path: str, exclude_node: list[str],
               replace_node_exclusions: bool, slurm_node_inventory: str, output: str) -> dict:
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
    text = spec_text(doc)
    atomic_write_text(host_spec, text)
    doc["config"] = {"original": str(host_spec), "resolved": os.path.realpath(host_spec), "container": str(cont_spec),
                     "sha256": sha256_bytes(text.encode()), "materialized": True, "frame": "submission_host"}
    meta = initial_metadata(doc, job_id)
    validate_metadata(meta)
    doc["initial_metadata"] = meta
    doc["retry_preparation"] = {"retry_of_plan": prior["plan_artifact"]["path"],
                                "retry_of_plan_sha256": prior["plan_artifact"]["sha256"], "inspection_reused": True,
                                "attempt_root": str(root), "container_attempt_root": str(croot),
                                "node_exclusions": doc["slurm_node_exclusions"], "inherited_node_exclusions": inherited}
    artifact.save(doc, output)
    return {"schema_version": 1, "job_id": job_id, "backend": doc["backend"], "output": str(output),
            "config": doc["config"], "node_exclusions": doc["slurm_node_exclusions"]}


def verify_provenance(plan_artifact: str, provenance_path: str) -> dict:
    doc = artifact.load(plan_artifact)
    build = doc["image"].get("source_build")
    if doc["image"]["mode"] != "source-build" or not build:
        raise CosmosPlanError("verify-provenance applies only to the source-build image mode")
    try:
        provenance = json.loads(Path(provenance_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CosmosPlanError(f"cannot read image provenance {provenance_path}: {exc}") from None
    repos = provenance.get("repositories") or {}
    entry = repos.get(build["source_repository"]) or {}
    problems = [f"{key}: expected {build[f'source_{key}']}, found {entry.get(key)}"
                for key in ("commit", "tree") if entry.get(key) != build[f"source_{key}"]]
    if entry.get("dirty"):
        problems.append("source tree is dirty")
    return {"ok": not problems, "errors": problems, "source_manifest_sha256": stable_hash(provenance)}


def extract_metrics_verb(status_file: str, evaluator_file: str | None, plan_artifact: str | None,
                         require_complete: bool) -> dict:
    records = parse_status_text(Path(status_file).read_text(encoding="utf-8"))
    evaluator = json.loads(Path(evaluator_file).read_text(encoding="utf-8")) if evaluator_file else None
    coverage = artifact.load(plan_artifact)["evaluation_contract"]["metric_coverage"] if plan_artifact else None
    return extract_metrics(records, evaluator, coverage, require_complete)


def evaluate(plan_artifact: str, inputs: dict, output: str | None) -> dict:
    doc = evaluation_plan(artifact.load(plan_artifact), inputs)
    if output:
        doc = artifact.save(doc | {"planner_request": {"evaluation_inputs": inputs}}, output)
    return {"ok": doc["ready"], **doc}


def write_json(path: str, value) -> None:
    atomic_write_text(path, pretty_json(value))
