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


def enroot_reference(image: str) -> str:
    """``docker://<registry>#<repository[:tag]>`` for ``enroot import``."""
    ref = image
    for prefix in ("docker://", "dockerd://"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            break
    else:
        if "://" in ref:
            raise CosmosPlanError(f"unsupported Enroot image scheme: {image}")
    if "/" not in ref:
        raise CosmosPlanError(f"container image must include a registry and repository: {image}")
    registry, rest = ref.split("/", 1)
    return f"docker://{registry}#{rest}"


def resolve_image(req, backend: str) -> dict:
    """Pick mode, tag and SQSH (existing, or derived with a one-time conversion command)."""
    mode = req.image_runtime_mode
    slurm = req.platform == "slurm"
    if mode == "auto":
        mode = "existing-sqsh" if slurm and req.sqsh_path else "packaged-image"
    image = {"mode": mode, "tag": None, "selection_source": None, "sqsh": None, "source_build": None}
    if mode == "existing-sqsh":
        if not slurm:
            raise CosmosPlanError("existing-sqsh runtime mode is supported only on SLURM/Pyxis")
        if not req.sqsh_path.endswith(".sqsh"):
            raise CosmosPlanError("existing-sqsh runtime mode requires the supplied .sqsh path")
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
                raise CosmosPlanError("sqsh_path must name a .sqsh artifact")
            image["sqsh"] = {"path": req.sqsh_path, "conversion_required": False, "command": None, "origin": "explicit_user_sqsh"}
        else:
            if not req.sqsh_cache_dir:
                raise CosmosPlanError("sqsh_cache_dir is required to materialize the packaged backend image on SLURM")
            path = os.path.join(req.sqsh_cache_dir, sqsh_filename(tag))
            needs = not os.path.exists(path)
            image["sqsh"] = {"path": path, "conversion_required": needs, "origin": "derived_from_image",
                             "command": f"enroot import --output {path} {enroot_reference(tag)}" if needs else None}
    return image
