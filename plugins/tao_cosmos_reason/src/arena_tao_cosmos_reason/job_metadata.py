"""Job metadata: the initial record, validation and terminal-state finalization (spec §8.3, §9).

The JSON schema (``schemas/cosmos-job-metadata.schema.json``) checks shapes; the consistency
rules that tie child exit, scheduler state and TAO status together are checked here.
"""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources
from pathlib import Path

import jsonschema

from arena_tao_cosmos_reason.credentials import find_credentials
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import atomic_write_text, pretty_json
from arena_tao_cosmos_reason.launch_env import metadata_environment
from arena_tao_cosmos_reason.metrics import collect_metrics, completion, read_status_file, terminal_status

SLURM_FIELDS = ("job_id", "submission_host", "cluster", "partition", "account", "qos", "reservation",
                "requested_resources", "allocated_resources", "node_list", "master_address", "master_port",
                "requeue", "exclusive", "time_limit", "timeout")


def _schema() -> dict:
    text = resources.files("arena_tao_cosmos_reason").joinpath("schemas/cosmos-job-metadata.schema.json").read_text()
    return json.loads(text)


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def initial_metadata(plan: dict, job_id: str | None) -> dict:
    """The PENDING record for a sealed plan (``job_id`` may be empty before the job record)."""
    req = plan["planner_request"] if "planner_request" in plan else plan["_request"]
    results = req["results_dir"]
    run_dir = f"{results.rstrip('/')}/{job_id or plan['experiment_id']}"
    image = plan["image"]
    return {
        "schema_version": 1,
        "experiment_id": plan["experiment_id"],
        "dataset": plan["dataset_family"],
        "training_mode": plan["training"]["training_mode"],
        "backend": plan["backend"],
        "tao_job_id": job_id or None,
        "slurm": {"job_id": None, "submission_host": None, "cluster": req["cluster"] or None,
                  "partition": req["partition"] or None, "account": req["account"] or None, "qos": req["qos"] or None,
                  "reservation": req["reservation"] or None, "requested_resources": plan["compute"],
                  "allocated_resources": None, "node_list": None, "master_address": None,
                  "master_port": req["master_port"], "requeue": False, "exclusive": req["exclusive"],
                  "time_limit": req["time_limit"], "timeout": req["timeout"]},
        "image": {"tag": image["tag"], "digest": None,
                  "provenance": image["source_build"] if image["mode"] == "source-build" else None,
                  "sqsh_path": (image.get("sqsh") or {}).get("path"), "sqsh_sha256": None},
        "repositories": ({image["source_build"]["source_repository"]: {"commit": image["source_build"]["source_commit"],
                                                                     "tree": image["source_build"]["source_tree"],
                                                                     "dirty": False}}
                         if image["mode"] == "source-build" else {}),
        "config": plan.get("config"),
        "paths": plan["paths"],
        "dataset_fingerprints": {s: plan["datasets"][s]["dataset_fingerprint"] for s in ("train", "validation")},
        "model": {"identity": plan["paths"].get("base_model"), "revision": plan["model"]["revision_resolution"],
                  "fingerprint": plan["model"]["fingerprint"], "prepared": plan["prepared_model_container_path"]},
        "launch_command": plan["command"],
        "environment": metadata_environment(plan["environment"]),
        "stdout": plan["slurm_logs"]["stdout"], "stderr": plan["slurm_logs"]["stderr"],
        "results_dir": results, "checkpoint_dir": req["checkpoint_dir"],
        "timestamps": {"planned": now_iso(), "started": None, "finished": None},
        "scheduler": {"state": "PLANNED", "reason": None, "exit_code": None},
        "child_process": {"exit_code": None},
        "terminal_tao_status": "PENDING",
        "metrics": {"average_training_loss": None, "average_validation_loss": None, "average_validation_accuracy": None},
        "artifacts": {"status_file": f"{run_dir}/status.json", "child_exit_file": f"{run_dir}/child_exit_code"},
    }


def validate_metadata(record: dict) -> dict:
    """Check required fields, the schema and the consistency rules; return ``{ok: true}``."""
    if not isinstance(record, dict):
        raise CosmosPlanError(f"SLURM metadata must be a JSON object, got a JSON {type(record).__name__}")
    required = _schema()["required"]
    missing = [k for k in required if k not in record]
    if missing:
        raise CosmosPlanError(f"SLURM metadata is incomplete; missing: {missing}")
    missing_slurm = [k for k in SLURM_FIELDS if k not in (record.get("slurm") or {})]
    if missing_slurm:
        raise CosmosPlanError(f"SLURM metadata is missing slurm fields: {missing_slurm}")
    try:
        jsonschema.validate(record, _schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "<root>"
        raise CosmosPlanError(f"SLURM metadata is invalid at {where}: {exc.message}") from None
    child = record["child_process"]["exit_code"]
    status = record["terminal_tao_status"]
    state = (record["scheduler"]["state"] or "").upper()
    if child not in (None, 0) and status == "SUCCESS":
        raise CosmosPlanError("nonzero child-process exit code cannot have terminal TAO SUCCESS")
    if record["slurm"]["requeue"] and child not in (None, 0):
        raise CosmosPlanError("requeue cannot hide a child-process failure")
    if state == "COMPLETED" and child is None:
        raise CosmosPlanError("scheduler COMPLETED is invalid without a captured child-process exit code")
    if status == "SUCCESS" and (state != "COMPLETED" or child != 0):
        raise CosmosPlanError("TAO SUCCESS requires scheduler COMPLETED and child-process exit code zero")
    leaks = find_credentials(record)
    if leaks:
        raise CosmosPlanError(f"SLURM metadata must not contain credentials: {'; '.join(leaks[:10])}")
    return {"ok": True}


def finalize_metadata(path: str, child_exit_file: str, status_file: str, scheduler_state: str,
                      scheduler_reason: str | None = None, scheduler_exit_code: str | None = None,
                      allocated_nodes: list[str] | None = None, job_id: str | None = None,
                      evaluator: dict | None = None, strict_completion: bool = False,
                      evaluator_source: str = "evaluator result") -> dict:
    """Decide the terminal state and rewrite the metadata file in place (sorted JSON).

    The terminal state is SUCCESS only with child exit 0, scheduler COMPLETED and a final SUCCESS
    record; losses that are present but inconsistent or non-finite make it FAILURE in every mode;
    with ``strict_completion`` every condition of spec §8.3 (losses, checkpoint, evaluator metric)
    must hold too.
    """
    file = Path(path)
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CosmosPlanError(f"cannot read job metadata {path}: {exc}") from None
    try:
        validate_metadata(record)
    except CosmosPlanError as exc:
        raise CosmosPlanError(f"job metadata {path}: {exc}") from None
    exit_path = Path(child_exit_file)
    if not exit_path.is_file():
        raise CosmosPlanError("child-process exit-code file is missing; scheduler completion is not sufficient")
    try:
        child = int(exit_path.read_text().strip())
    except ValueError:
        raise CosmosPlanError(f"child-process exit-code file is invalid: {child_exit_file}") from None
    records = read_status_file(status_file)
    status = terminal_status(records)
    if status is None:
        raise CosmosPlanError("TAO structured status file contains no terminal record")
    nodes = list(allocated_nodes or [])
    record["slurm"].update(job_id=job_id or record["slurm"].get("job_id"), node_list=",".join(nodes) or None,
                           allocated_resources={"nodes": len(nodes)} if nodes else record["slurm"].get("allocated_resources"))
    state = (scheduler_state or "").upper()
    record["scheduler"] = {"state": state, "reason": scheduler_reason, "exit_code": scheduler_exit_code}
    record["child_process"] = {"exit_code": child}
    record["timestamps"]["finished"] = now_iso()
    metrics = collect_metrics(records, evaluator, evaluator_source=evaluator_source)
    record["metrics"] = {
        "average_training_loss": (metrics["train_loss"] or {}).get("average"),
        "average_validation_loss": (metrics["validation_loss"] or {}).get("average"),
        "average_validation_accuracy": (metrics["accuracy"] or {}).get("average_validation_accuracy"),
    }
    verdict = completion(child, state, records, metrics)
    record["completion"] = verdict | {"strict": strict_completion}
    final = status
    if child != 0 or state != "COMPLETED" or status != "SUCCESS":
        final = "FAILURE"
    if metrics["invalid"] or (strict_completion and not verdict["complete"]):
        final = "FAILURE"  # inconsistent or non-finite losses fail in every mode (spec §8.2 rules 3-4)
    record["terminal_tao_status"] = final
    validate_metadata(record)
    atomic_write_text(file, pretty_json(record))
    return record
