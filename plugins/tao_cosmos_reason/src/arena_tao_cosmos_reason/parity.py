"""Paired parity between a Cosmos-RL plan and a Cosmos Framework plan (spec §8.5)."""

from __future__ import annotations

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.routing import FRAMEWORK, RL

OPTIMIZATION_KEYS = ("training_mode", "epochs", "effective_global_batch", "optimizer", "learning_rate", "optimizer_epsilon",
                     "scheduler", "warmup", "weight_decay", "gradient_clip", "precision", "seed", "sequence_length", "frames",
                     "vision", "system_prompt", "validation_frequency_epochs", "checkpoint_frequency_epochs", "lora")
SYNTAX_DIFFERENCES = [
    "topology: Framework shard/replica degrees versus Cosmos-RL controller/policy replicas",
    "checkpoint format: Framework DCP versus Cosmos-RL policy checkpoints",
]


def parity(first: dict, second: dict) -> dict:
    """Score each check ``equivalent`` or ``invalid_mismatch``; ``launch_allowed`` if none mismatch."""
    if {first["backend"], second["backend"]} != {FRAMEWORK, RL}:
        raise CosmosPlanError("paired parity requires one Cosmos-RL plan and one Cosmos Framework plan")
    fw, rl = (first, second) if first["backend"] == FRAMEWORK else (second, first)
    checks = {}

    def check(name, a, b):
        checks[name] = {"status": "equivalent" if a == b else "invalid_mismatch", FRAMEWORK: a, RL: b}

    check("model_fingerprint", fw["model"]["fingerprint"], rl["model"]["fingerprint"])
    for split in ("train", "validation"):
        check(f"{split}_dataset_fingerprint", fw["datasets"][split]["dataset_fingerprint"], rl["datasets"][split]["dataset_fingerprint"])
    for key in OPTIMIZATION_KEYS:
        check(f"optimization.{key}", fw["training"].get(key), rl["training"].get(key))
    fa, ra = fw["decoder_artifact"], rl["decoder_artifact"]
    if not fa.get("enabled") and not ra.get("enabled"):
        check("decoder_artifact", {"enabled": False, "fingerprint": fa.get("fingerprint")},
              {"enabled": False, "fingerprint": ra.get("fingerprint")})
    else:
        check("decoder_artifact", fa, ra)
    check("evaluator_accuracy_contract", fw["evaluation_contract"]["metric_coverage"], rl["evaluation_contract"]["metric_coverage"])
    invalid = sorted(name for name, c in checks.items() if c["status"] == "invalid_mismatch")
    return {"checks": checks, "invalid_mismatches": invalid, "launch_allowed": not invalid,
            "backend_syntax_differences": SYNTAX_DIFFERENCES,
            "comparative_requests": [bool(p["planner_request"].get("comparative")) for p in (fw, rl)]}
