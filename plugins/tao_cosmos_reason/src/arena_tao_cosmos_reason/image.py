"""Runtime image and SQSH selection (spec §3.10, §7.11)."""

from __future__ import annotations

import os
import re

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.routing import FRAMEWORK, RL

PACKAGED_IMAGES = {
    RL: "nvcr.io/nvidia/tao/tao-toolkit:6.26.0-cosmos-rl",
    FRAMEWORK: "nvcr.io/nvidia/tao/tao-toolkit:6.26.0-cosmos-framework",
}
"""Packaged backend images (the skill's metadata; replace when the skill publishes new tags)."""


def sqsh_filename(image: str) -> str:
    """``<last path segment, unsafe runs -> '-', stripped>.sqsh``."""
    leaf = image.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", leaf).strip("-.")
    if not name:
        raise CosmosPlanError(f"cannot derive an SQSH filename from image {image!r}")
    return f"{name}.sqsh"


def enroot_reference(image: str, field: str = "image_tag") -> str:
    """``docker://<registry>#<repository[:tag]>`` for ``enroot import`` (errors name ``field``)."""
    ref = image
    for prefix in ("docker://", "dockerd://"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            break
    else:
        if "://" in ref:
            raise CosmosPlanError(f"unsupported Enroot image scheme: {field}={image!r}")
    if "/" not in ref:
        raise CosmosPlanError(f"container image must include a registry and repository: {field}={image!r}")
    registry, rest = ref.split("/", 1)
    return f"docker://{registry}#{rest}"


def _source_build_image(req, image: dict) -> dict:
    """A source build runs only what the clean build produces (spec §3.10, §7.11): its own image
    tag, and on SLURM a fresh SQSH converted from it, never a prebuilt image or an old SQSH."""
    if not req.image_tag:
        raise CosmosPlanError("source-build runtime mode requires image_tag: the tag the clean source build produces "
                              "(a packaged image is never used for a source build)")
    if req.sqsh_path:
        raise CosmosPlanError(f"source-build runtime mode disallows SQSH reuse: sqsh_path={req.sqsh_path!r} must be "
                              "empty; the SQSH is converted from the freshly built image under sqsh_cache_dir")
    image.update(tag=req.image_tag, selection_source="source_build")
    if req.platform != "slurm":
        return image
    if not req.sqsh_cache_dir:
        raise CosmosPlanError("sqsh_cache_dir is required to convert the source-built image on SLURM")
    stem = sqsh_filename(req.image_tag)[: -len(".sqsh")]
    path = os.path.join(req.sqsh_cache_dir, f"{stem}-{req.source_commit[:12]}.sqsh")
    if os.path.exists(path):
        raise CosmosPlanError(f"source-build SQSH {path} already exists and SQSH reuse is disallowed for source builds: "
                              "remove it (it is converted again from the rebuilt image) or use another sqsh_cache_dir")
    image["sqsh"] = {"path": path, "conversion_required": True, "origin": "converted_from_source_build",
                     "reuse_allowed": False, "command": f"enroot import --output {path} {enroot_reference(req.image_tag)}"}
    return image


def resolve_image(req, backend: str) -> dict:
    """Pick mode, tag and SQSH (existing, or derived with a one-time conversion command)."""
    mode = req.image_runtime_mode
    slurm = req.platform == "slurm"
    if mode == "auto":
        mode = "existing-sqsh" if slurm and req.sqsh_path else "packaged-image"
    image = {"mode": mode, "tag": None, "selection_source": None, "sqsh": None, "source_build": None}
    if mode == "existing-sqsh":
        if not slurm:
            raise CosmosPlanError(f"existing-sqsh runtime mode is supported only on SLURM/Pyxis "
                                  f"(image_runtime_mode=existing-sqsh, platform={req.platform})")
        if not req.sqsh_path.endswith(".sqsh"):
            raise CosmosPlanError(f"existing-sqsh runtime mode requires the supplied .sqsh path: sqsh_path={req.sqsh_path!r}")
        image.update(tag=req.image_tag or req.sqsh_path, selection_source="explicit_user_sqsh",
                     sqsh={"path": req.sqsh_path, "conversion_required": False, "command": None, "origin": "explicit_user_sqsh"})
        return image
    if mode == "source-build":
        needed = ("source_repository", "source_commit", "source_tree", "source_branch", "source_base_image",
                  "source_build_context", "source_build_timestamp")
        missing = [n for n in needed if not getattr(req, n)]
        if missing:
            raise CosmosPlanError(f"source-build runtime mode requires {missing}")
        image["source_build"] = {n: getattr(req, n) for n in needed}
        image["source_build"]["provenance_path"] = "/opt/tao/image-provenance.json"
        image["source_build"]["sqsh_reuse_allowed"] = False
        return _source_build_image(req, image)
    if req.image_tag:
        tag, source = req.image_tag, "explicit_image_tag"
    else:
        tag = PACKAGED_IMAGES.get(backend)
        if not tag:
            raise CosmosPlanError(f"backend {backend} has no packaged container image; this is a skill-package defect")
        source = "packaged_backend_default"
    image.update(tag=tag, selection_source=source)
    if slurm:
        if req.sqsh_path:
            if not req.sqsh_path.endswith(".sqsh"):
                raise CosmosPlanError(f"sqsh_path must name a .sqsh artifact: sqsh_path={req.sqsh_path!r}")
            image["sqsh"] = {"path": req.sqsh_path, "conversion_required": False, "command": None, "origin": "explicit_user_sqsh"}
        else:
            if not req.sqsh_cache_dir:
                raise CosmosPlanError("sqsh_cache_dir is required to materialize the packaged backend image on SLURM")
            path = os.path.join(req.sqsh_cache_dir, sqsh_filename(tag))
            needs = not os.path.exists(path)
            image["sqsh"] = {"path": path, "conversion_required": needs, "origin": "derived_from_image",
                             "command": f"enroot import --output {path} {enroot_reference(tag)}" if needs else None}
    return image
