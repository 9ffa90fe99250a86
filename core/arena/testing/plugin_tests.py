"""Helpers the plugins' tests share: peer reference code that no installed package provides,
and the checks every plugin's tests make of how arena lists and requires it.

- :func:`robosuite_quat2axisangle`: robosuite's ``transform_utils.quat2axisangle`` as written
  (it modifies its argument), the reference that openpi's LIBERO example, OpenVLA-OFT's LIBERO
  client and vla-eval's LIBERO benchmark copy; :func:`arena.rotations.quat_to_axis_angle` is
  checked bit for bit against it.
- :func:`listed_plugin`: one plugin's entry of ``arena plugins --json``.
- :func:`without_distribution`: make ``requires:`` see one distribution as not installed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

__all__ = ["listed_plugin", "robosuite_quat2axisangle", "without_distribution"]


def robosuite_quat2axisangle(quat: np.ndarray) -> np.ndarray:
    """robosuite ``utils/transform_utils.py`` ``quat2axisangle``, statement for statement:
    openpi ``examples/libero/main.py`` ``_quat2axisangle`` (199-214 at 15a9616) and OFT
    ``experiments/robot/libero/libero_utils.py`` ``quat2axisangle`` (l.63-86) are copies of it.
    Clips ``quat[3]`` in place, as the original does: pass a copy."""
    if quat[3] > 1.0:
        quat[3] = 1.0
    elif quat[3] < -1.0:
        quat[3] = -1.0
    den = np.sqrt(1.0 - quat[3] * quat[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (quat[:3] * 2.0 * math.acos(quat[3])) / den


def listed_plugin(name: str, *, timeout: float = 300.0) -> dict[str, Any]:
    """The entry of plugin ``name`` in ``arena plugins --json``, run in a fresh interpreter
    (so entry points load as a user's do): ``distribution``, ``version``, ``hooks``,
    ``registered`` (``{kind: sorted names}``).

    Raises:
        AssertionError: the command fails, or lists no plugin ``name``.
    """
    result = subprocess.run(
        [sys.executable, "-m", "arena", "plugins", "--json"], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)["plugins"]}
    assert name in plugins, f"plugin '{name}' not listed (listed: {sorted(plugins)})"
    return plugins[name]


def without_distribution(monkeypatch: pytest.MonkeyPatch, distribution: str) -> None:
    """Make :mod:`arena.config.requires` see ``distribution`` as not installed (every other
    distribution keeps its installed version) until ``monkeypatch`` undoes it."""
    import importlib.metadata

    from arena.config import requires as requires_module

    real_version = importlib.metadata.version

    def version(dist: str) -> str:
        if dist == distribution:
            raise importlib.metadata.PackageNotFoundError(dist)
        return real_version(dist)

    monkeypatch.setattr(requires_module, "version", version)
