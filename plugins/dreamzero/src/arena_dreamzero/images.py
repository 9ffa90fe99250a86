"""Letterbox resizing: keep the aspect ratio, fill the rest with black (openpi's ``resize_with_pad``).

Pure numpy (bilinear, half-pixel centres), so the client needs no OpenCV or Pillow.
"""

from __future__ import annotations

import numpy as np

__all__ = ["letterbox"]


def _axis(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = np.clip((np.arange(dst) + 0.5) * (src / dst) - 0.5, 0, src - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, src - 1)
    return lo, hi, (pos - lo).astype(np.float32)


def letterbox(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize ``uint8 (..., H, W, C)`` images into ``uint8 (..., height, width, C)``.

    The image is scaled by ``min(height / H, width / W)`` and centred on a black canvas.
    Images already of the target size are returned as a contiguous copy.

    Raises:
        ValueError: not a uint8 array with at least 3 dimensions.
    """
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim < 3:
        raise ValueError(f"letterbox expects uint8 (..., H, W, C) images; got {images.dtype} {images.shape}")
    h, w = images.shape[-3], images.shape[-2]
    if (h, w) == (height, width):
        return np.array(images, copy=True, order="C")
    scale = min(height / h, width / w)
    nh, nw = max(1, min(height, round(h * scale))), max(1, min(width, round(w * scale)))
    y0, y1, wy = _axis(h, nh)
    x0, x1, wx = _axis(w, nw)
    img = images.astype(np.float32)
    rows = img[..., y0, :, :] * (1 - wy)[:, None, None] + img[..., y1, :, :] * wy[:, None, None]
    resized = rows[..., :, x0, :] * (1 - wx)[:, None] + rows[..., :, x1, :] * wx[:, None]
    out = np.zeros(images.shape[:-3] + (height, width, images.shape[-1]), dtype=np.uint8)
    top, left = (height - nh) // 2, (width - nw) // 2
    out[..., top : top + nh, left : left + nw, :] = np.clip(np.rint(resized), 0, 255).astype(np.uint8)
    return out
