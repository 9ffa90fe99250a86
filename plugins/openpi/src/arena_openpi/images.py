"""Resize-with-pad, as openpi's clients do before sending images.

Behaviour (``openpi_client.image_tools.resize_with_pad``, which copies TensorFlow's
``tf.image.resize_with_pad`` with PIL; ``reference/protocols.md`` section 2.5): scale by
``1 / max(w / W, h / H)`` with sizes truncated to ints, PIL bilinear resampling, then centre
the result on a zero (black) canvas of ``H x W``; an image already ``H x W`` is returned
unchanged.
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
