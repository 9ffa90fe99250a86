"""Model preparation: direct use, immutable Hub snapshot, or Omni -> exact Qwen3-VL conversion
(spec §3.7, §7.9). The staged helper text is deterministic, so its SHA-256 is sealed at plan time.
"""

from __future__ import annotations

import os

from arena_tao_cosmos_reason.container_paths import translate
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import sha256_bytes
from arena_tao_cosmos_reason.model_ref import resolve_model_reference
from arena_tao_cosmos_reason.routing import FRAMEWORK

DEFAULT_ARCHITECTURE = "Qwen/Qwen3-VL-8B-Instruct"
CONVERTERS = {FRAMEWORK: "cosmos_framework.scripts.convert_model_to_vlm_safetensors",
              "cosmos-rl": "cosmos_rl.model_preparation.vlm_safetensors"}
HELPER_NAME = "prepare_cosmos3_vlm_checkpoint.py"
PREPARATION_OK = "TAO_COSMOS_MODEL_PREPARATION_OK"
SQSH_CONVERTER_ENTRIES = {
    FRAMEWORK: ["cosmos_framework/scripts/convert_model_to_vlm_safetensors.py"],
    "cosmos-rl": ["cosmos_rl/model_preparation/vlm_safetensors.py",
                  "cosmos_framework/scripts/convert_model_to_vlm_safetensors.py",
                  "opt/tao/framework-converter-runtime.json"],
}


def helper_text(converter: str, source: str, architecture: str, output: str) -> str:
    """The staged preparation helper: runs the backend converter, then prints the OK marker."""
    return "\n".join([
        "#!/usr/bin/env python3",
        '"""Convert a Cosmos3 Omni checkpoint to exact-key Qwen3-VL safetensors (generated; do not edit)."""',
        "import runpy, sys",
        f"sys.argv = [{converter!r}, '--source', {source!r}, '--architecture', {architecture!r}, '--output', {output!r}]",
        f"runpy.run_module({converter!r}, run_name='__main__')",
        f"print({PREPARATION_OK!r})",
        "",
    ])


def model_preparation(req, tier, backend, fmt, model, revision, mounts, strict, container, resolver,
                      prepared_explicit, reuse) -> dict:
    """Return ``{record, container_path, runtime_model_type}`` for the plan."""
    source_host = req.base_model_path_or_uri
    fp16 = model["fingerprint"][:16]
    prepared_host = os.path.join(req.checkpoint_dir, "prepared", fp16)
    prepared_container = f"{container['checkpoint_dir'].rstrip('/')}/prepared/{fp16}"
    hub = revision["kind"] == "huggingface_model"
    if prepared_explicit:
        return {"record": {"kind": "explicit_prepared_checkpoint", "required": False,
                           "reason": "an explicit prepared checkpoint was supplied and validated",
                           "runtime_host_path": prepared_explicit["path"]},
                "container_path": translate(prepared_explicit["path"], mounts, strict),
                "runtime_model_type": prepared_explicit["model_type"]}
    if fmt in ("qwen3_vl", "cosmos3_edge") and not hub:
        return {"record": {"kind": "direct", "required": False,
                           "reason": f"the supplied checkpoint is already {fmt}; no processor overlay is created",
                           "runtime_host_path": source_host},
                "container_path": translate(source_host, mounts, strict), "runtime_model_type": fmt}
    if fmt in ("qwen3_vl", "cosmos3_edge"):
        return {"record": {"kind": "immutable_public_checkpoint_snapshot", "required": True,
                           "reason": f"download {revision['repo_id']}@{revision['resolved_revision']} once",
                           "platform_action": {"tool": "huggingface_hub.snapshot_download", "repo_id": revision["repo_id"],
                                               "revision": revision["resolved_revision"], "local_dir": prepared_host,
                                               "token_env": "HF_TOKEN"},
                           "runtime_host_path": prepared_host, "runtime_container_path": prepared_container,
                           "storage": {"scope": "compute_verified_shared_checkpoint_dir"}},
                "container_path": prepared_container, "runtime_model_type": fmt}
    # cosmos3_omni
    arch_ref = req.vlm_architecture_model_path_or_uri or DEFAULT_ARCHITECTURE
    arch_source = "advanced_override" if req.vlm_architecture_model_path_or_uri else "packaged_nano_default"
    if reuse:
        arch_rev = reuse["model"].get("vlm_architecture_revision_resolution")
    else:
        arch_rev = resolve_model_reference(arch_ref, req.vlm_architecture_revision, resolver,
                                           field="vlm_architecture_model_path_or_uri")
    if arch_rev["kind"] == "huggingface_model" and not arch_rev["resolved_revision"]:
        raise CosmosPlanError("immutable architecture-model revision is required for a URI/identifier")
    model["vlm_architecture_revision_resolution"] = arch_rev
    converter = CONVERTERS[backend]
    arch_container = translate(arch_ref, mounts, strict) if arch_rev["kind"] != "huggingface_model" else arch_ref
    source_container = translate(source_host, mounts, strict) if not hub else source_host
    helper = helper_text(converter, source_container, arch_container, prepared_container)
    return {
        "record": {
            "kind": "cosmos3_omni_to_exact_qwen3_vl", "required": True,
            "reason": "cosmos3_omni checkpoints need an immutable exact-key conversion to Qwen3-VL safetensors",
            "converter": converter, "architecture_reference": arch_ref, "architecture_source": arch_source,
            "command": f"python3 <results>/<job>/model-preparation/{HELPER_NAME}",
            "helper": {"name": HELPER_NAME, "sha256": sha256_bytes(helper.encode()), "text": helper},
            "runtime_host_path": prepared_host, "runtime_container_path": prepared_container,
            "source_host_path": source_host, "source_container_path": source_container,
            "source_checkpoint_immutable": True, "conversion_notice_required": True,
            "controller_local_output_forbidden": True,
            "storage": {"scope": "compute_verified_shared_checkpoint_dir"},
            "sqsh_required_entries": SQSH_CONVERTER_ENTRIES[backend],
            "sqsh_runtime_validation_mode": "imported_converter_module" if backend != FRAMEWORK else None,
        },
        "container_path": prepared_container,
        "runtime_model_type": "qwen3_vl",
    }
