"""The evaluation plan, inherited from a sealed training plan (spec §8.4).

Only ``required_evaluation_intake`` may come from the user; everything else (model, data,
prompt, preprocessing, precision, scoring) is copied from the training plan.
"""

from __future__ import annotations

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.routing import FRAMEWORK

INHERITED = ("validation_dataset_fingerprint", "annotations", "media_roots", "system_prompt", "frames", "vision",
             "max_video_pixels", "precision", "seed", "batch_size", "task_profile", "metric_coverage")


def evaluation_plan(training: dict, inputs: dict) -> dict:
    """Build the evaluation plan; ``ready`` is true only when every required input is supplied.

    ``inputs`` may hold ``results_dir``, ``checkpoint_selection``, ``generation.max_tokens``,
    ``task.type`` and ``metrics.names``; any other key is rejected (it would override an
    inherited field).
    """
    contract = training["evaluation_contract"]
    required = list(contract["required_evaluation_intake"])
    unknown = sorted(set(inputs) - set(required))
    if unknown:
        raise CosmosPlanError(f"evaluation inherits these from the training plan; do not supply them: {unknown}")
    missing = [k for k in required if inputs.get(k) in (None, "", [])]
    generation = dict(contract["generation"])
    if inputs.get("generation.max_tokens") is not None:
        generation["max_tokens"] = int(inputs["generation.max_tokens"])
    backend = training["backend"]
    checkpoint = inputs.get("checkpoint_selection")
    actions = ([{"action": "framework_dcp_export", "checkpoint": checkpoint, "reuse": "only a complete, matching export"},
                {"action": "verify_hf_export"}] if backend == FRAMEWORK else
               [{"action": "cosmos_rl_verify_hf_export", "checkpoint": checkpoint},
                {"action": "re_resolve_with_export_manifest"}])
    execution = {"backend": backend, "image": training["image"]["tag"], "sqsh": training.get("sqsh"),
                 "environment": {k: v for k, v in training["environment"].items() if not k.startswith("TAO_VIDEO_TRAIN")},
                 "results_dir": inputs.get("results_dir"),
                 "command": f"python3 -m tao_cosmos_eval --checkpoint {checkpoint} --max-tokens {generation['max_tokens']}"}
    return {
        "schema_version": 1,
        "kind": "cosmos_evaluation_plan",
        "ready": not missing,
        "required_user_inputs": missing,
        "source_plan": {"path": training["plan_artifact"]["path"], "sha256": training["plan_artifact"]["sha256"],
                        "experiment_id": training["experiment_id"]},
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
