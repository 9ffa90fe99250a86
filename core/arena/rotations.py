"""Rotation helpers shared by embodiment adapters.

``quat_to_axis_angle`` is robosuite's ``transform_utils.quat2axisangle``, the formula that
openpi's LIBERO example (``examples/libero/main.py`` ``_quat2axisangle``), OpenVLA-OFT's LIBERO
client (``experiments/robot/libero/libero_utils.py`` ``quat2axisangle``) and vla-eval's LIBERO
benchmark (``_quat_to_axisangle_robosuite``, which casts the result to float32) each copy, so
the openpi and vla_eval plugins' LIBERO adapters share this one implementation.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["quat_to_axis_angle"]


def quat_to_axis_angle(quat: np.ndarray, dtype: DTypeLike = np.float64) -> np.ndarray:
    """Axis-angle ``(3,)`` (axis times angle, rad) of a unit quaternion ``(x, y, z, w)``.

    Bit for bit robosuite's ``quat2axisangle`` run on ``quat`` as a ``dtype`` array: ``w``
    clipped to ``[-1, 1]``, ``den = sqrt(1 - w * w)``, ``float64`` zeros when
    ``math.isclose(den, 0.0)`` (with its default tolerances: only ``den == 0``), else
    ``(xyz * 2.0 * acos(w)) / den`` in that operation order, of ``dtype``. Unlike robosuite's,
    the argument is not modified (robosuite clips it in place).

    Raises:
        ValueError: ``quat`` does not hold 4 values.
    """
    q = np.array(quat, dtype).reshape(4)
    if q[3] > 1.0:
        q[3] = 1.0
    elif q[3] < -1.0:
        q[3] = -1.0
    den = np.sqrt(1.0 - q[3] * q[3])
    if math.isclose(den, 0.0):
        return np.zeros(3)
    return (q[:3] * 2.0 * math.acos(q[3])) / den
