"""A double of the Cosmos DROID policy server, on arena's generic openpi-protocol double.

``cosmos_server_double()`` returns an :class:`arena.testing.OpenPIDouble` (a context
manager; ``.host``, ``.port``, ``.model.requests``) whose model:

- validates each request as the robolab server reads it: ``observation/image`` uint8
  ``(540, 640, 3)`` (the client-composed view), ``observation/joint_position`` float ``(7,)``,
  ``observation/gripper_position`` float ``(1,)``, a non-empty str ``prompt``, finite values;
  anything else raises :class:`RequestRejected` (the client sees a traceback text frame, then
  close 1011, like from the real server);
- answers like the checkpoint: ``{"action": float32 (32, 8), "policy_timing": {"infer_ms":
  float}}``, with ``server_timing`` added by the server. Every row holds the request's joints
  and gripper, so a robot driven by it stays put.

Facts: ``reference/isaaclab-arena.md`` section 3.2, ``reference/protocols.md`` section 2.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from arena.testing import OpenPIDouble, RecordingModel
from arena_cosmos.adapters import CosmosDroidAdapter
from arena_cosmos.policy import COSMOS_CHUNK_ROWS


class RequestRejected(ValueError):
    """A request the Cosmos server would fail on."""


def _check(request: dict[str, Any], key: str, kind: str, shape: tuple[int, ...]) -> None:
    if key not in request:
        raise RequestRejected(f"request has no '{key}' (got {sorted(request)})")
    value = request[key]
    if not isinstance(value, np.ndarray):
        raise RequestRejected(f"'{key}' is {type(value).__name__}, expected an ndarray {shape}")
    if (value.dtype != np.uint8 if kind == "u1" else value.dtype.kind != "f") or value.shape != shape:
        want = "uint8" if kind == "u1" else "float"
        raise RequestRejected(f"'{key}' is {value.dtype} {value.shape}, expected {want} {shape}")
    if kind == "f" and not np.all(np.isfinite(value)):
        raise RequestRejected(f"'{key}' holds NaN or infinite values")


def validate_cosmos_droid_request(request: dict[str, Any]) -> None:
    """Check every key, dtype and shape the Cosmos DROID server reads."""
    _check(request, "observation/image", "u1", CosmosDroidAdapter.COMPOSED_SHAPE)
    _check(request, "observation/joint_position", "f", (7,))
    _check(request, "observation/gripper_position", "f", (1,))
    prompt = request.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise RequestRejected(f"'prompt' must be a non-empty str, got {prompt!r}")


def cosmos_reply(request: dict[str, Any]) -> dict[str, Any]:
    """A reply shaped like the checkpoint's: ``action float32 (32, 8)`` plus ``policy_timing``."""
    started = time.perf_counter()
    action = np.empty((COSMOS_CHUNK_ROWS, 8), np.float32)
    action[:, :7] = request["observation/joint_position"]
    action[:, 7] = request["observation/gripper_position"][0]
    return {"action": action, "policy_timing": {"infer_ms": (time.perf_counter() - started) * 1e3}}


def cosmos_server_double(**knobs: Any) -> OpenPIDouble:
    """An (unstarted) Cosmos DROID server double; ``knobs`` go to :class:`arena.testing.RecordingModel`."""
    return OpenPIDouble(RecordingModel(cosmos_reply, validate_cosmos_droid_request, metadata={}, **knobs))
