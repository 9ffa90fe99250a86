"""A double of openpi's policy server, on arena's generic openpi-protocol double.

``openpi_server_double("droid", "pi05")`` returns an :class:`arena.testing.OpenPIDouble`
(use it as a context manager; ``.host``, ``.port``, ``.model.requests``) whose model:

- validates each request like the real server's input transforms would read it, and
  stricter where openpi's example clients are exact: every key, dtype and shape (images
  ``uint8 (224, 224, 3)``, or ``(3, 224, 224)`` for ALOHA), finite state, a str prompt. A
  bad request raises :class:`RequestRejected`, so the client sees what the real server sends
  on an error: a traceback text frame, then close 1011;
- answers like the checkpoint: ``{"actions": float64 (H, A), "policy_timing": {"infer_ms":
  float}}`` with the real chunk length H (DROID: 15 for pi05, 10 for pi0; LIBERO: 10 / 50;
  ALOHA: 50) and the server adds ``server_timing`` (``infer_ms``, then ``prev_total_ms``);
- sends the config's metadata on connect (ALOHA: ``reset_pose``; others: ``{}``).

Facts: ``reference/protocols.md`` sections 2.2 and 2.5.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from arena.testing import OpenPIDouble, RecordingModel
from arena_openpi.adapters import ALOHA_CAMERAS, IMAGE_SIZE


class RequestRejected(ValueError):
    """A request the real openpi server would fail on (or that differs from openpi's examples)."""


#: (embodiment, variant) -> (chunk rows H, action width A) the checkpoint returns.
CHUNK_SHAPES: dict[tuple[str, str], tuple[int, int]] = {
    ("droid", "pi05"): (15, 8),
    ("droid", "pi0"): (10, 8),
    ("libero", "pi05"): (10, 7),
    ("libero", "pi0"): (50, 7),
    ("aloha", "pi0"): (50, 14),
    ("aloha", "pi05"): (50, 14),
}

#: Metadata the server sends on connect, per embodiment.
METADATA: dict[str, dict[str, Any]] = {
    "droid": {},
    "libero": {},
    "aloha": {"reset_pose": [0, -1.5, 1.5, 0, 0, 0]},
}


def _require(request: dict[str, Any], key: str) -> Any:
    if key not in request:
        raise RequestRejected(f"request has no '{key}' (got {sorted(request)})")
    return request[key]


def check_image(value: Any, key: str, shape: tuple[int, ...]) -> None:
    """Raise :class:`RequestRejected` unless ``value`` is a uint8 ndarray of ``shape``."""
    if not isinstance(value, np.ndarray):
        raise RequestRejected(f"'{key}' is {type(value).__name__}, expected a uint8 ndarray {shape}")
    if value.dtype != np.uint8 or value.shape != shape:
        raise RequestRejected(f"'{key}' is {value.dtype} {value.shape}, expected uint8 {shape}")


def check_state(value: Any, key: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    """Raise :class:`RequestRejected` unless ``value`` is a finite float ndarray of one of ``shapes``."""
    if not isinstance(value, np.ndarray) or value.dtype.kind != "f":
        raise RequestRejected(f"'{key}' must be a float ndarray of shape {shapes[0]}, got {type(value).__name__}")
    if value.shape not in shapes:
        raise RequestRejected(f"'{key}' has shape {value.shape}, expected {' or '.join(map(str, shapes))}")
    if not np.all(np.isfinite(value)):
        raise RequestRejected(f"'{key}' holds NaN or infinite values")


def check_prompt(request: dict[str, Any], required: bool = True) -> None:
    """A str prompt (openpi's tokenizer raises "Prompt is required" without one)."""
    if "prompt" not in request:
        if required:
            raise RequestRejected("request has no 'prompt' (openpi: ValueError: Prompt is required)")
        return
    if not isinstance(request["prompt"], str) or (required and not request["prompt"].strip()):
        raise RequestRejected(f"'prompt' must be a non-empty str, got {request['prompt']!r}")


def validate_droid_request(request: dict[str, Any]) -> None:
    """The DROID request of openpi's ``examples/droid/main.py``."""
    size = (IMAGE_SIZE, IMAGE_SIZE, 3)
    check_image(_require(request, "observation/exterior_image_1_left"), "observation/exterior_image_1_left", size)
    check_image(_require(request, "observation/wrist_image_left"), "observation/wrist_image_left", size)
    check_state(_require(request, "observation/joint_position"), "observation/joint_position", ((7,),))
    check_state(_require(request, "observation/gripper_position"), "observation/gripper_position", ((1,), ()))
    check_prompt(request)


def validate_libero_request(request: dict[str, Any]) -> None:
    """The LIBERO request of openpi's ``examples/libero/main.py``."""
    size = (IMAGE_SIZE, IMAGE_SIZE, 3)
    check_image(_require(request, "observation/image"), "observation/image", size)
    check_image(_require(request, "observation/wrist_image"), "observation/wrist_image", size)
    check_state(_require(request, "observation/state"), "observation/state", ((8,),))
    check_prompt(request)


def validate_aloha_request(request: dict[str, Any]) -> None:
    """The ALOHA request of openpi's ``examples/aloha_sim`` (nested ``images`` dict, CHW)."""
    check_state(_require(request, "state"), "state", ((14,),))
    images = _require(request, "images")
    if not isinstance(images, dict) or "cam_high" not in images:
        raise RequestRejected("'images' must be a dict with at least 'cam_high'")
    for name, image in images.items():
        if name not in ALOHA_CAMERAS:
            raise RequestRejected(f"unknown ALOHA camera '{name}' (expected one of {', '.join(ALOHA_CAMERAS)})")
        check_image(image, f"images/{name}", (3, IMAGE_SIZE, IMAGE_SIZE))
    check_prompt(request, required=False)


VALIDATORS: dict[str, Callable[[dict[str, Any]], None]] = {
    "droid": validate_droid_request,
    "libero": validate_libero_request,
    "aloha": validate_aloha_request,
}


def reply_factory(embodiment: str = "droid", variant: str = "pi05") -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Replies shaped like the checkpoint's: ``actions float64 (H, A)`` plus ``policy_timing``.

    DROID and ALOHA chunks hold the current joints (and gripper) on every row, so a robot
    driven by them stays put; LIBERO chunks are zero end-effector deltas.
    """
    rows, width = CHUNK_SHAPES[(embodiment, variant)]

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        actions = np.zeros((rows, width), np.float64)
        if embodiment == "droid":
            actions[:, :7] = request["observation/joint_position"]
            actions[:, 7] = np.asarray(request["observation/gripper_position"], np.float64).reshape(-1)[0]
        elif embodiment == "aloha":
            actions[:] = request["state"]
        return {"actions": actions, "policy_timing": {"infer_ms": (time.perf_counter() - started) * 1e3}}

    return reply


def openpi_server_double(embodiment: str = "droid", variant: str = "pi05", **knobs: Any) -> OpenPIDouble:
    """An (unstarted) openpi server double for the checkpoint of ``embodiment`` and ``variant``.

    ``knobs`` go to :class:`arena.testing.RecordingModel` (``infer_delay_s``,
    ``first_delay_s``, ``fail_on_request``). Use ``with openpi_server_double() as server:``.

    Raises:
        KeyError: no checkpoint of that embodiment and variant is modelled.
    """
    if (embodiment, variant) not in CHUNK_SHAPES:
        raise KeyError(f"no openpi checkpoint modelled for {embodiment}/{variant}")
    model = RecordingModel(
        reply_factory(embodiment, variant), VALIDATORS[embodiment], metadata=METADATA[embodiment], **knobs
    )
    return OpenPIDouble(model)
