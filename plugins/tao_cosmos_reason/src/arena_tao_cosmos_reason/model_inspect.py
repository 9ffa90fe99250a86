"""Model contracts: local checkpoint checks, inventory and fingerprint, and the Nano/Edge
``base_model_format`` rules (spec §3.5-3.7).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import read_json_file, sha256_file, stable_hash

METADATA_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "chat_template.json",
)
KNOWN_MODEL_TYPES = ("qwen3_vl", "cosmos3_omni", "cosmos3_edge")
NANO_FORMATS = ("qwen3_vl", "cosmos3_omni")
PREPARED_TYPES = {"nano": ("qwen3_vl",), "edge": ("cosmos3_edge", "nemotron_h", "nemotron_vl")}
INDEX = "model.safetensors.index.json"


def read_config(folder: str | Path) -> dict:
    """Parse ``<folder>/config.json``.

    Raises:
        CosmosPlanError: missing or invalid JSON.
    """
    config = read_json_file(
        Path(folder) / "config.json", f"base model is missing config.json: {folder}", "base model config.json is invalid"
    )
    if not isinstance(config, dict):
        raise CosmosPlanError("base model config.json is invalid: not a JSON object")
    return config


def inspect_local_model(path: str, fast: bool = False) -> dict:
    """Check a local checkpoint folder and fingerprint it (spec §3.6).

    Metadata files are always content-hashed; weights are hashed unless ``fast`` (then
    identified by path and size).

    Raises:
        CosmosPlanError: not a folder, no/invalid config, no weights or index, or an index
            with no ``weight_map``, an unsafe path or a missing file.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise CosmosPlanError(f"base model path is inaccessible and is not a supported URI: {path}")
    if not root.is_dir():
        raise CosmosPlanError(f"base model must be a directory or supported URI: {path}")
    config = read_config(root)
    weights = sorted(p.name for p in root.glob("*.safetensors"))
    index_path = root / INDEX
    if not weights and not index_path.is_file():
        raise CosmosPlanError(f"base model contains no safetensors weights or index: {path}")
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CosmosPlanError(f"base model safetensors index is invalid: {exc}") from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CosmosPlanError("base model safetensors index has no weight_map")
        for name in sorted(set(weight_map.values())):
            pure = PurePosixPath(str(name))
            if pure.is_absolute() or ".." in pure.parts or not str(name):
                raise CosmosPlanError(f"base model safetensors index references an unsafe weight path: {name}")
            if not (root / pure).is_file():
                raise CosmosPlanError(f"base model safetensors index references a missing weight file: {name}")
        weights = sorted(set(weights) | {str(n) for n in weight_map.values()})
    inventory = []
    for name in METADATA_FILES:
        file = root / name
        if file.is_file():
            inventory.append({"path": name, "size": file.stat().st_size, "sha256": sha256_file(file)})
    for name in weights:
        file = root / name
        entry = {"path": name, "size": file.stat().st_size}
        if not fast:
            entry["sha256"] = sha256_file(file)
        inventory.append(entry)
    return {
        "kind": "local",
        "path": str(path),
        "format": config.get("model_type") or "unknown",
        "config": {"model_type": config.get("model_type")},
        "inventory": inventory,
        "fingerprint": stable_hash(inventory),
        "fingerprint_mode": "metadata_content_and_weight_sizes" if fast else "full_content",
    }


def inspect_uri_model(uri: str, revision: str | None) -> dict:
    """Identity of a Hub model: the stable hash of ``{uri, revision}`` (spec §3.3, [C]).

    Raises:
        CosmosPlanError: no immutable revision was resolved.
    """
    if not revision:
        raise CosmosPlanError("base_model_revision is required for a model URI/identifier so a clean run is immutable")
    return _unresolved("uri", uri, stable_hash({"uri": uri, "revision": revision}), "uri_and_revision")


def inspect_target_compute_model(path: str) -> dict:
    """Identity of a compute-frame path the controller cannot see (fingerprinted remotely)."""
    return _unresolved(
        "target_compute", path, stable_hash({"target_compute_path": path}), "target_compute_content_fingerprint"
    )


def _unresolved(kind: str, path: str, fingerprint: str, fingerprint_mode: str) -> dict:
    """A model identity whose format and files the controller has not seen."""
    return {
        "kind": kind,
        "path": path,
        "format": "unresolved",
        "config": {"model_type": None},
        "inventory": [],
        "fingerprint": fingerprint,
        "fingerprint_mode": fingerprint_mode,
    }


def choose_base_model_format(tier: str, requested: str, local_model_type: str | None) -> tuple[str, str]:
    """Validate ``base_model_format`` for ``tier``; return ``(format, selection_source)``.

    The choice is never inferred for Nano; a local checkpoint whose known ``model_type``
    disagrees with the selection is rejected (the source is never relabelled).
    """
    fmt = (requested or "auto").strip().casefold()
    if tier == "nano":
        if fmt == "auto":
            raise CosmosPlanError(
                "Cosmos3-Nano input checkpoint model_type must be selected explicitly: choose qwen3_vl for "
                "direct Hugging Face training or cosmos3_omni for immutable exact-key conversion before training"
            )
        source = "explicit_user_selection"
    else:
        if fmt == "auto":
            fmt, source = "cosmos3_edge", "resolved_edge_model"
        else:
            source = "explicit_user_selection"
    if local_model_type in KNOWN_MODEL_TYPES and local_model_type != fmt:
        raise CosmosPlanError(
            "selected base_model_format does not match the supplied local checkpoint: "
            f"selected={fmt!r}, config.json.model_type={local_model_type!r}"
        )
    if tier == "nano" and fmt not in NANO_FORMATS:
        raise CosmosPlanError("Cosmos3-Nano base_model_format must be qwen3_vl or cosmos3_omni")
    if tier == "edge" and fmt != "cosmos3_edge":
        raise CosmosPlanError("Cosmos3-Edge base_model_format must be cosmos3_edge")
    return fmt, source


def check_prepared_checkpoint(path: str, tier: str) -> dict:
    """Validate an explicit ``prepared_checkpoint_path`` (spec §3.7)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise CosmosPlanError(f"prepared checkpoint is inaccessible: prepared_checkpoint_path={path!r}")
    model_type = read_config(root).get("model_type")
    if model_type not in PREPARED_TYPES[tier]:
        raise CosmosPlanError(f"prepared_checkpoint_path has incompatible model_type={model_type} "
                              f"(expected one of {list(PREPARED_TYPES[tier])}): {path}")
    return {"path": str(path), "model_type": model_type}
