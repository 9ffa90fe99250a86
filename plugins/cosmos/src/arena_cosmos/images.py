"""Image helpers of the Cosmos DROID request: resize-with-pad and the half-size downsample.

``resize_with_pad`` behaves like openpi's client helper (TensorFlow ``resize_with_pad`` with
PIL): scale by ``1 / max(w / W, h / H)`` (sizes truncated to ints), bilinear, centred on a
zero canvas; an image already ``H x W`` is returned as is.

``half_size`` is bilinear downsampling by exactly 2 with half-pixel centres (torch
``F.interpolate(scale_factor=0.5, mode="bilinear", align_corners=False)``, which Arena's
client uses): each output pixel is the mean of a 2 x 2 block, rounded to the nearest integer.
"""

from __future__ import annotations

import numpy as np
from PIL import Image


def resize_with_pad(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Return ``uint8 (height, width, 3)``: ``image`` (``uint8 (h, w, 3)``) scaled to fit and zero-padded.

    Raises:
        ValueError: ``image`` is not an ``(h, w, 3)`` uint8 array.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 (h, w, 3) image, got {image.dtype} {image.shape}")
    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image
    ratio = max(w / width, h / height)
    new_h, new_w = int(h / ratio), int(w / ratio)
    resized = Image.fromarray(image).resize((new_w, new_h), resample=Image.BILINEAR)
    canvas = np.zeros((height, width, 3), np.uint8)
    top, left = max(0, (height - new_h) // 2), max(0, (width - new_w) // 2)
    canvas[top : top + new_h, left : left + new_w] = np.asarray(resized)
    return canvas


def half_size(image: np.ndarray) -> np.ndarray:
    """``uint8 (h // 2, w // 2, 3)``: the mean of each 2 x 2 block of ``uint8 (h, w, 3)`` (h, w even).

    Raises:
        ValueError: odd height or width.
    """
    h, w = image.shape[:2]
    if h % 2 or w % 2:
        raise ValueError(f"half_size needs an even height and width, got {h} x {w}")
    blocks = image.reshape(h // 2, 2, w // 2, 2, -1).astype(np.float32)
    return np.rint(blocks.mean(axis=(1, 3))).astype(np.uint8)
