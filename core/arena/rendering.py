"""Headless OpenGL for MuJoCo: EGL on a node with an NVIDIA GPU, OSMesa otherwise.

MuJoCo picks its OpenGL platform from ``$MUJOCO_GL`` when it is first imported (PyOpenGL,
which some benchmarks use, from ``$PYOPENGL_PLATFORM``). On Linux,
:func:`configure_headless_rendering` sets both when the user has not: ``egl`` when the node
has an NVIDIA GPU with its EGL driver (``/dev/nvidiactl`` and ``libEGL_nvidia`` plus the
``libEGL`` dispatcher are present), ``osmesa`` (software) otherwise. The user's ``MUJOCO_GL``
always wins. The choice is inherited by every process arena starts (runners, environment
workers), which see it as already made; ``$ARENA_MUJOCO_GL_CHOSEN`` says why arena chose it,
for ``arena doctor`` and the run's provenance (:func:`rendering_info`).

Costs measured on this project's machines: OSMesa renders a 224x224 MuJoCo frame in ~80-500
ms on a CPU core; EGL on an H200 node in ~1-2 ms.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from typing import Any

#: Set by arena next to ``MUJOCO_GL`` when arena chose the backend: why it chose it.
CHOSEN_ENV = "ARENA_MUJOCO_GL_CHOSEN"


def nvidia_egl_available() -> bool:
    """Whether this node has an NVIDIA GPU whose EGL driver MuJoCo can use."""
    if not os.path.exists("/dev/nvidiactl"):
        return False
    return ctypes.util.find_library("EGL_nvidia") is not None and ctypes.util.find_library("EGL") is not None


def choose_backend() -> tuple[str, str]:
    """``(backend, reason)`` arena would choose here when ``MUJOCO_GL`` is unset."""
    if nvidia_egl_available():
        return "egl", "NVIDIA GPU with EGL found (/dev/nvidiactl, libEGL_nvidia)"
    return "osmesa", "no NVIDIA GPU with EGL: software rendering"


def configure_headless_rendering() -> None:
    """Set ``MUJOCO_GL`` / ``PYOPENGL_PLATFORM`` on Linux when the user did not.

    Must run before MuJoCo is first imported; a no-op elsewhere or when ``MUJOCO_GL`` is set.
    """
    if not sys.platform.startswith("linux") or "MUJOCO_GL" in os.environ:
        return
    backend, reason = choose_backend()
    os.environ["MUJOCO_GL"] = backend
    os.environ.setdefault("PYOPENGL_PLATFORM", backend)
    os.environ[CHOSEN_ENV] = reason


def rendering_info() -> dict[str, Any]:
    """``{"mujoco_gl", "chosen_by", "reason"}`` of this process (after configuration).

    ``chosen_by`` is ``"user"`` (``MUJOCO_GL`` was set), ``"arena"`` (with the reason) or
    ``None`` (unset: MuJoCo's own default, e.g. on macOS).
    """
    value = os.environ.get("MUJOCO_GL")
    if value is None:
        return {"mujoco_gl": None, "chosen_by": None, "reason": None}
    reason = os.environ.get(CHOSEN_ENV)
    return {"mujoco_gl": value, "chosen_by": "arena" if reason else "user", "reason": reason}
