"""Decoder/cache runtime profiles for each backend (spec §6.10, §3.13 flag hygiene)."""

from __future__ import annotations

from arena_tao_cosmos_reason.annotations import CONVERSATION
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.routing import FRAMEWORK

RL_PROFILES = ("system-pyav", "pynv-device-rgbp")
RL_RUNTIME_FIELDS = ("rl_video_cache_size", "rl_decoder_cache_size", "rl_batch_threads", "rl_dataloader_workers", "rl_prefetch_factor")
FW_RUNTIME_FIELDS = ("framework_video_cache_size", "framework_process_threads", "framework_dataloader_workers")


def check_flag_hygiene(req, backend: str) -> None:
    """Reject knobs owned by the other backend (spec §3.13)."""
    if backend == FRAMEWORK:
        if req.rl_video_profile != "auto":
            raise CosmosPlanError("--rl-video-profile applies only to the cosmos-rl backend")
        if req.rl_baked_overlay_pythonpath:
            raise CosmosPlanError("rl_baked_overlay_pythonpath applies only to the cosmos-rl backend")
        if req.rl_validation_cache_frontload_batch_size or req.rl_validation_cache_frontload_unique_per_batch:
            raise CosmosPlanError("Cosmos-RL validation cache frontloading does not apply to cosmos-framework")
        if any(getattr(req, f) is not None for f in RL_RUNTIME_FIELDS):
            raise CosmosPlanError("Cosmos-RL video runtime overrides do not apply to cosmos-framework")
        if req.video_override_map or req.video_override_manifest or req.video_override_fingerprint:
            raise CosmosPlanError("video override artifacts are owned by the Cosmos-RL backend and must not be supplied to cosmos-framework")
        if req.framework_baked_overlay_pythonpath and not req.framework_baked_overlay_pythonpath.startswith("/tao-patches-framework-"):
            raise CosmosPlanError("framework_baked_overlay_pythonpath must start with /tao-patches-framework-")
    else:
        if (req.framework_baked_overlay_pythonpath or req.framework_baked_overlay_module_prefix
                or any(getattr(req, f) is not None for f in FW_RUNTIME_FIELDS)):
            raise CosmosPlanError("Framework video runtime overrides do not apply to cosmos-rl")
        if req.framework_validation_shard_strategy or req.framework_validation_video_feature_cache_size is not None:
            raise CosmosPlanError("Framework validation sharding applies only to cosmos-framework")
        if req.framework_per_forward_batch:
            raise CosmosPlanError("Framework per-forward batch applies only to cosmos-framework")
        if req.rl_baked_overlay_pythonpath and not req.rl_baked_overlay_pythonpath.startswith("/tao-patches/"):
            raise CosmosPlanError("rl_baked_overlay_pythonpath must start with /tao-patches/")
        trio = [req.video_override_map, req.video_override_manifest, req.video_override_fingerprint]
        if any(trio) and not all(trio):
            raise CosmosPlanError("video_override_map, video_override_manifest and video_override_fingerprint must be supplied together")
        fp = req.video_override_fingerprint
        if fp and (len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp)):
            raise CosmosPlanError("video_override_fingerprint must be a lower-case 64-hex SHA-256")


def validation_shard_strategy(req, family: str, validation: dict) -> str:
    """``media_grouped`` for conversation data whose records outnumber unique media, else ``stride``."""
    explicit = req.framework_validation_shard_strategy or req.validation_shard_strategy
    if explicit and explicit != "auto":
        return explicit
    if family == CONVERSATION and validation["record_count"] > validation["profile"]["unique_media_count"]:
        return "media_grouped"
    return "stride"


def rl_video_runtime(req, family: str, train: dict, validation: dict, shard: str) -> dict:
    profile = req.rl_video_profile
    if profile == "auto":
        profile = "pynv-device-rgbp" if family == CONVERSATION else "system-pyav"
    if profile not in RL_PROFILES:
        raise CosmosPlanError(f"unsupported Cosmos-RL video profile: rl_video_profile={profile!r} "
                              f"(auto, {', '.join(RL_PROFILES)})")
    pynv = profile == "pynv-device-rgbp"
    if not pynv and (req.rl_video_cache_size or req.rl_decoder_cache_size):
        raise CosmosPlanError("PyNV cache overrides require the pynv-device-rgbp Cosmos-RL video profile")
    largest = max(train["profile"]["unique_media_count"], validation["profile"]["unique_media_count"])
    unique_val = validation["profile"]["unique_media_count"]
    return {
        "profile": profile,
        "reader": "pynvvideocodec" if pynv else "torchvision",
        "video_decoder": "pynvvideocodec" if pynv else "pyav",
        "frame_transfer": "device_rgbp" if pynv else "host_rgb",
        "dataloader_workers": req.rl_dataloader_workers if req.rl_dataloader_workers is not None else (1 if pynv else 0),
        "prefetch_factor": req.rl_prefetch_factor if req.rl_prefetch_factor is not None else (2 if pynv else None),
        "batch_threads": req.rl_batch_threads if req.rl_batch_threads is not None else (4 if pynv else 1),
        "video_cache_size": (req.rl_video_cache_size or largest) if pynv else 0,
        "decoder_cache_size": (req.rl_decoder_cache_size or largest) if pynv else 0,
        "capability_fallback": "tao_system_pyav_sparse" if pynv else None,
        "validation_shard_strategy": shard,
        "validation_feature_cache_size": min(unique_val, 512) if shard == "media_grouped" else 0,
        "cache_scope": "rank_local_on_demand",
    }


def framework_video_runtime(req, family: str, validation: dict, shard: str, runtime_model_type: str) -> dict:
    unique_val = validation["profile"]["unique_media_count"]
    default_feature = min(unique_val, 512) if shard == "media_grouped" and runtime_model_type == "qwen3_vl" else 0
    feature = req.framework_validation_video_feature_cache_size
    if feature and runtime_model_type != "qwen3_vl":
        raise CosmosPlanError("the Framework validation video feature cache needs a qwen3_vl runtime model. "
                              "Re-plan with --framework-validation-video-feature-cache-size 0")
    unique = max(validation["profile"]["unique_media_count"], 1)
    return {
        "profile": "torchcodec-cuda-on-demand",
        "video_decoder": "torchcodec",
        "decoder_device": "cuda",
        "dataloader_workers": req.framework_dataloader_workers if req.framework_dataloader_workers is not None else 1,
        "prefetch_factor": 4 if family == CONVERSATION else 2,
        "process_threads": req.framework_process_threads if req.framework_process_threads is not None else 8,
        "decoder_threads": 1,
        "video_cache_size": req.framework_video_cache_size if req.framework_video_cache_size is not None else unique,
        "pin_memory": family == CONVERSATION,
        "validation_shard_strategy": shard,
        "validation_feature_cache_size": feature if feature is not None else default_feature,
        "validation_processed_video_cache_size": unique_val,
        "cache_scope": "rank_local_on_demand",
    }
