"""LeRobot feature batches from arena requests (the server side of the adapters).

Minimal version written for serving; the ``lerobot-adapters`` branch owns this module and its
equivalence tests (same name and signature).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Request keys that are LeRobot observation features (the rest, e.g. ``task``, are not stacked).
OBSERVATION_PREFIX = "observation."


def is_image_key(key: str) -> bool:
    """Whether ``key`` names a camera feature (``observation.image`` or ``observation.images.<cam>``)."""
    return key == "observation.image" or key.startswith("observation.images.")


def to_policy_batch(requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Stack per-env requests into the batch LeRobot's ``preprocess_observation`` + ``add_envs_task`` give.

    ``requests``: one dict per env with ``observation.images.<cam>`` ``uint8 (H, W, 3)``,
    ``observation.state`` ``float (D,)``, optionally ``observation.environment_state`` ``float (E,)``
    and ``task`` (str). Returns ``{image key: float32 (B, 3, H, W) in [0, 1], state keys: float32
    (B, D), "task": [str] * B}`` as torch tensors, computed as ``lerobot.envs.utils.preprocess_observation``
    does (``from_numpy``, HWC -> CHW, ``.type(float32)``, ``/= 255``; states ``.float()``).

    Raises:
        ValueError: no requests, requests with different keys, or an image that is not uint8 HWC.
    """
    import torch

    if not requests:
        raise ValueError("to_policy_batch needs at least one request")
    keys = sorted(k for k in requests[0] if k.startswith(OBSERVATION_PREFIX))
    for request in requests[1:]:
        other = sorted(k for k in request if k.startswith(OBSERVATION_PREFIX))
        if other != keys:
            raise ValueError(f"requests of one batch carry different features: {keys} and {other}")
    batch: dict[str, Any] = {}
    for key in keys:
        stacked = np.stack([np.asarray(r[key]) for r in requests])
        if is_image_key(key):
            if stacked.dtype != np.uint8 or stacked.ndim != 4 or stacked.shape[-1] != 3:
                raise ValueError(f"{key} must be uint8 (H, W, 3) per env, got {stacked.dtype} {stacked.shape[1:]}")
            image = torch.from_numpy(stacked).permute(0, 3, 1, 2).contiguous().type(torch.float32)
            image /= 255
            batch[key] = image
        else:
            batch[key] = torch.from_numpy(np.ascontiguousarray(stacked)).float()
    batch["task"] = [str(r.get("task") or "") for r in requests]
    return batch
