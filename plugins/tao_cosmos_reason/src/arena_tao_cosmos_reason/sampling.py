"""Video sampling rules and the processor profile (spec §3.9).

Frame counts are frames; pixel budgets are pixels (width x height x frames for max pixels).
"""

from __future__ import annotations

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import stable_hash
from arena_tao_cosmos_reason.routing import RL

DAFT_OPTIONS = ("fps", "min_frames", "max_frames", "video_start", "video_end", "video_resized_height",
                "video_resized_width", "video_min_pixels", "video_total_pixels")
TIER_DEFAULTS = {
    "nano": {"frames": 8, "sequence_length": 40960, "attention": "cosmos"},
    "edge": {"frames": 6, "sequence_length": 16000, "attention": "flash_attention_2"},
}
NANO_MAX_PIXELS = 81920
FPS_CAPACITY_FRAMES = 768
DEFAULT_FRAME = (1280, 720)


def validate_sampling(req, backend: str) -> None:
    """Check the sampling inputs of ``req`` (a PlanRequest) against the table of spec §3.9."""
    if backend != RL:
        used = sorted(name for name in DAFT_OPTIONS if getattr(req, name) not in (None, 0))
        if used:
            raise CosmosPlanError(f"DAFT vision options apply only to the cosmos-rl backend: {used}")
    if req.fps is not None:
        if req.frames:
            raise CosmosPlanError("fps and frames/nframes are mutually exclusive")
        if req.fps <= 0:
            raise CosmosPlanError("fps must be positive")
    elif req.min_frames is not None or req.max_frames is not None:
        raise CosmosPlanError("min_frames and max_frames require fps sampling")
    for name in ("min_frames", "max_frames"):
        value = getattr(req, name)
        if value is not None and value < 1:
            raise CosmosPlanError(f"{name} must be positive")
    if req.min_frames and req.max_frames and req.min_frames > req.max_frames:
        raise CosmosPlanError("min_frames must not exceed max_frames")
    if (req.video_start is not None and req.video_start < 0) or (req.video_end is not None and req.video_end < 0):
        raise CosmosPlanError("video_start and video_end must be nonnegative")
    if req.video_start is not None and req.video_end is not None and req.video_start >= req.video_end:
        raise CosmosPlanError("video_start must be less than video_end")
    if (req.video_resized_height is None) != (req.video_resized_width is None):
        raise CosmosPlanError("video_resized_height and video_resized_width must be set together")
    for name in ("video_resized_height", "video_resized_width", "video_min_pixels", "video_total_pixels",
                 "frame_width", "frame_height"):
        value = getattr(req, name)
        if value is not None and value < 1:
            raise CosmosPlanError(f"{name} must be positive")
    if req.video_max_pixels is not None and req.video_max_pixels < 0:
        raise CosmosPlanError("video_max_pixels must be nonnegative")
    if req.video_min_pixels and req.video_max_pixels and req.video_min_pixels > req.video_max_pixels:
        raise CosmosPlanError("video_min_pixels must not exceed video_max_pixels")


def native_vision(req, frames: int, max_pixels: int | None) -> dict:
    """The backend-native vision block: ``{fps, min_frames?, max_frames?}`` or ``{nframes}``
    plus clip/resize/pixel keys that are set and non-zero."""
    if req.fps is not None:
        block = {"fps": float(req.fps)}
        if req.min_frames:
            block["min_frames"] = req.min_frames
        if req.max_frames:
            block["max_frames"] = req.max_frames
    else:
        block = {"nframes": frames}
    extras = {"video_start": req.video_start, "video_end": req.video_end, "resized_height": req.video_resized_height,
              "resized_width": req.video_resized_width, "min_pixels": req.video_min_pixels,
              "max_pixels": max_pixels, "total_pixels": req.video_total_pixels}
    block.update({k: v for k, v in extras.items() if v})
    return block


def processor_profile(req, tier: str, train: dict, validation: dict) -> dict:
    """Derive frames, frame size, pixel budget, attention and the vision blocks.

    Returns ``{profile, contract_vision, max_pixels, frames, frame_width, frame_height}``;
    ``profile.vision`` is computed before the pixel budget (the [S] subtlety pinned in T29).
    """
    defaults = TIER_DEFAULTS[tier]
    fps_mode = req.fps is not None
    frames = 0 if fps_mode else (req.frames or defaults["frames"])
    capacity = req.max_frames if req.max_frames else (FPS_CAPACITY_FRAMES if fps_mode else frames)
    measured = [(s["profile"]["resolution"]["median_width"], s["profile"]["resolution"]["median_height"])
                for s in (train, validation)
                if s["profile"]["resolution"]["median_width"] and s["profile"]["resolution"]["median_height"]]
    if req.video_resized_width and req.video_resized_height:
        width, height = req.video_resized_width, req.video_resized_height
    elif req.frame_width and req.frame_height:
        width, height = req.frame_width, req.frame_height
    elif measured:
        width, height = max(measured, key=lambda wh: wh[0] * wh[1])
    else:
        width, height = DEFAULT_FRAME
    if req.video_max_pixels is not None:
        max_pixels = req.video_max_pixels
    elif tier == "nano":
        max_pixels = NANO_MAX_PIXELS
    else:
        max_pixels = int(capacity * min(width * height, DEFAULT_FRAME[0] * DEFAULT_FRAME[1]))
    attention = defaults["attention"] if req.attention_implementation == "auto" else req.attention_implementation
    overrides = any(getattr(req, n) not in (None, 0) for n in DAFT_OPTIONS + ("frames", "video_max_pixels", "frame_width", "frame_height"))
    source = ("user" if overrides or req.attention_implementation != "auto"
              else "dataset_metadata" if measured else "model_safe_default")
    profile = {
        "sampling_mode": "fps" if fps_mode else "nframes",
        "frames": frames,
        "capacity_frames": capacity,
        "frame_width": int(width),
        "frame_height": int(height),
        "max_pixels": max_pixels,
        "attention_implementation": attention,
        "sequence_length": req.sequence_length or defaults["sequence_length"],
        "vision": native_vision(req, frames, req.video_max_pixels),
        "source": source,
        "checkpoint_mutation": False,
        "dataset_profile_fingerprints": {"train": stable_hash(train["profile"]), "validation": stable_hash(validation["profile"])},
        "selection_basis": "explicit user overrides" if source == "user" else
        "declared dataset dimensions" if source == "dataset_metadata" else "tier-safe defaults",
    }
    return {"profile": profile, "contract_vision": native_vision(req, frames, max_pixels), "max_pixels": max_pixels,
            "frames": frames, "frame_width": int(width), "frame_height": int(height)}
