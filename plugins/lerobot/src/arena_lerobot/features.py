"""Requests of the LeRobot adapters -> the observation batch a LeRobot policy's preprocessor takes.

Runs in the model venv (it imports torch); the adapters (:mod:`arena_lerobot.adapters`) run in
arena's interpreter and already did what ``lerobot-eval`` does before and after
``preprocess_observation`` that is specific to a benchmark (key names, LIBERO's rotation and
state, Meta-World's ``agent_pos``), so what is left is ``preprocess_observation`` itself
(``lerobot/envs/utils.py`` 49-110 in LeRobot 0.4.4) on the stacked batch, and
``add_envs_task``'s ``task`` list (156-185).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["is_image_key", "to_policy_batch"]

_OBS = "observation."


def is_image_key(key: str) -> bool:
    """``observation.image`` or ``observation.images.<cam>`` (LeRobot's ``OBS_IMAGE(S)``)."""
    return key == "observation.image" or key.startswith("observation.images.")


def to_policy_batch(requests: list[dict[str, Any]]) -> dict[str, torch.Tensor | list[str]]:
    """Stack ``B`` adapter requests into LeRobot's observation batch (CPU tensors).

    Each request holds ``observation.*`` arrays and ``task`` (str); other keys (e.g. what a
    client adds to keep per-env policy state) are not part of the batch and are left out.
    The conversion is ``preprocess_observation``'s, operation for operation:

    - images (``observation.image``, ``observation.images.<cam>``): ``uint8 (H, W, C)`` with
      ``C < H`` and ``C < W`` -> ``float32 (B, C, H, W)`` in [0, 1] (``b h w c -> b c h w``,
      then ``/= 255`` in float32);
    - every other ``observation.*`` key (``observation.state``,
      ``observation.environment_state``): ``(D,)`` numbers -> ``float32 (B, D)``
      (``torch.from_numpy(x).float()``: float64 rounded to nearest);
    - ``task``: ``list[str]`` of ``B`` (``""`` where a request has none).

    Raises:
        ValueError: no requests; requests with different ``observation.*`` keys, or a key
            whose shapes differ between requests; an image that is not ``uint8 (H, W, C)``
            channel-last (LeRobot asserts the same); a state that is not 1-D numbers; a
            ``task`` that is not a str.
    """
    if not requests:
        raise ValueError("to_policy_batch needs at least one request")
    keys = sorted(k for k in requests[0] if k.startswith(_OBS))
    if not keys:
        raise ValueError(f"request 0 has no observation.* keys (got {sorted(requests[0])})")
    for i, request in enumerate(requests[1:], 1):
        other = sorted(k for k in request if k.startswith(_OBS))
        if other != keys:
            raise ValueError(f"request {i} has observation keys {other}, request 0 has {keys}")
    batch: dict[str, torch.Tensor | list[str]] = {}
    for key in keys:
        values = [np.asarray(request[key]) for request in requests]
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            raise ValueError(f"'{key}' has different shapes across requests: {sorted(shapes)}")
        stacked = np.stack(values)
        if is_image_key(key):
            if stacked.dtype != np.uint8 or stacked.ndim != 4:
                raise ValueError(f"'{key}' must be uint8 (H, W, C) per request, got {values[0].dtype} {values[0].shape}")
            _, h, w, c = stacked.shape
            if not (c < h and c < w):
                raise ValueError(f"'{key}' must be channel-last (H, W, C), got {values[0].shape}")
            image = torch.from_numpy(stacked).permute(0, 3, 1, 2).contiguous().type(torch.float32)
            image /= 255
            batch[key] = image
        else:
            if stacked.ndim != 2 or stacked.dtype.kind not in "fiub":
                raise ValueError(f"'{key}' must be a 1-D array of numbers per request, got {values[0].dtype} {values[0].shape}")
            batch[key] = torch.from_numpy(stacked).float()
    tasks = []
    for i, request in enumerate(requests):
        task = request.get("task", "")
        if not isinstance(task, str):
            raise ValueError(f"request {i}: 'task' must be a str, got {type(task).__name__}")
        tasks.append(task)
    batch["task"] = tasks
    return batch
