"""The sealed plan artifact: canonical hash, atomic save, verified load (spec §5.2-5.6)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from arena_tao_cosmos_reason.credentials import find_credentials
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import atomic_write_text, pretty_json, read_json_file, stable_hash

ENVELOPE_VERSION = 1


def _check_local(path: str) -> Path:
    if not path or "://" in str(path):
        raise CosmosPlanError("plan_artifact must be a local controller-side filesystem path")
    return Path(path).expanduser().absolute()


def check_no_credentials(plan: dict) -> None:
    """Refuse a plan that holds a credential (spec §5.1); the error names where, not what."""
    leaks = find_credentials(plan)
    if leaks:
        raise CosmosPlanError(f"a plan must not contain credentials (pass HF_TOKEN/NGC_KEY by name only): "
                              f"{'; '.join(leaks[:10])}")


def seal(plan: dict, path: str) -> dict:
    """Embed ``plan_artifact = {schema_version: 1, path, sha256}``; the hash excludes that key."""
    target = _check_local(path)
    body = {k: v for k, v in plan.items() if k != "plan_artifact"}
    request = body.get("planner_request")
    for name, value in (request.items() if isinstance(request, dict) else ()):
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise CosmosPlanError(f"planner request field {name!r} is not JSON serializable: "
                                  f"{type(value).__name__}") from None
    for name, value in body.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CosmosPlanError(f"plan field {name!r} is not JSON serializable: {exc}") from None
    check_no_credentials(body)
    sealed = dict(body)
    sealed["plan_artifact"] = {"schema_version": ENVELOPE_VERSION, "path": str(target), "sha256": stable_hash(body)}
    sealed["plan_artifact"]["approved_sha256"] = plan.get("plan_artifact", {}).get("approved_sha256") or sealed["plan_artifact"]["sha256"]
    return sealed


def save(plan: dict, path: str) -> dict:
    """Seal and write atomically (``indent=2``, sorted keys, trailing newline)."""
    sealed = seal(plan, path)
    atomic_write_text(_check_local(path), pretty_json(sealed))
    return sealed


def load(path: str) -> dict:
    """Load and verify: local path, JSON object, envelope version, checksum, planner request."""
    plan = read_json_file(
        _check_local(path), f"approved plan artifact is inaccessible: {path}",
        "approved plan artifact must contain a JSON object",
    )
    if not isinstance(plan, dict):
        raise CosmosPlanError("approved plan artifact must contain a JSON object")
    envelope = plan.get("plan_artifact") if isinstance(plan.get("plan_artifact"), dict) else {}
    if envelope.get("schema_version") != ENVELOPE_VERSION:
        raise CosmosPlanError("approved plan artifact has an unsupported schema version")
    body = {k: v for k, v in plan.items() if k != "plan_artifact"}
    found = stable_hash(body)
    if envelope.get("sha256") != found:
        raise CosmosPlanError(f"approved plan artifact checksum mismatch: expected {envelope.get('sha256') or '<missing>'}, "
                              f"found {found}")
    if not isinstance(plan.get("planner_request"), dict) or not plan["planner_request"]:
        raise CosmosPlanError("approved plan artifact has no resolved planner request")
    return plan


def resolved_path(path: str) -> str:
    return os.fspath(_check_local(path))
