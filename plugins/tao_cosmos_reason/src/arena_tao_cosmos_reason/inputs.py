"""The one expensive inspection of model and datasets, identical on either frame (spec §1.3)."""

from __future__ import annotations

import os

from arena_tao_cosmos_reason.dataset_inspect import inspect_split
from arena_tao_cosmos_reason.model_inspect import inspect_local_model


def inspection_payload(req, model_is_local: bool) -> dict:
    """The JSON request for :func:`inspect_inputs` (also sent to a remote probe)."""
    return {
        "model_path": req.base_model_path_or_uri if model_is_local else None,
        "fast_model": req.fast_model_fingerprint,
        "fast_media": req.fast_media_fingerprint,
        "family": req.dataset_family,
        "tasks": list(req.task),
        "splits": {
            "train": {"annotations": list(req.train_annotation), "media_roots": list(req.train_media_root)},
            "validation": {"annotations": list(req.validation_annotation), "media_roots": list(req.validation_media_root)},
        },
        "extra_models": [p for p in (req.prepared_checkpoint_path, req.vlm_architecture_model_path_or_uri)
                         if p and "://" not in p and os.path.isabs(p)],
    }


def inspect_inputs(payload: dict) -> dict:
    """Run the model and split inspections named in ``payload``."""
    model = inspect_local_model(payload["model_path"], fast=payload["fast_model"]) if payload.get("model_path") else None
    datasets = {
        split: inspect_split(split, spec["annotations"], spec["media_roots"], family=payload["family"],
                             tasks=payload["tasks"], fast_media=payload["fast_media"])
        for split, spec in payload["splits"].items()
    }
    return {"model": model, "datasets": datasets}
