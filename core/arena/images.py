"""Image helpers shared by embodiment adapters: resize-with-pad (letterbox) and half-size.

``resize_with_pad`` behaves like openpi's client helper ``openpi_client.image_tools.
resize_with_pad`` (a copy of TensorFlow's ``tf.image.resize_with_pad`` with PIL;
``reference/protocols.md`` section 2.5): scale by ``1 / max(w / W, h / H)`` with the sizes
truncated to ints, PIL bilinear resampling, centred on a zero (black) canvas; images already
``H x W`` come back unchanged. The openpi, Cosmos, GR00T and DreamZero adapters all send
letterboxed images, so they share this one implementation.

``to_uint8`` is the one conversion of camera images to ``uint8``: every adapter and the
video recorder use it, so a float or 16-bit image is either converted without changing what
it shows or refused with the same message everywhere — never wrapped around.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from arena.errors import ObservationError

__all__ = ["half_size", "letterbox", "resize_with_pad", "to_uint8"]


def _resize_one(image: np.ndarray, height: int, width: int) -> np.ndarray:
    h, w = image.shape[:2]
    if (h, w) == (height, width):
        return image
    ratio = max(w / width, h / height)
    new_h, new_w = max(1, int(h / ratio)), max(1, int(w / ratio))
    resized = Image.fromarray(image).resize((new_w, new_h), resample=Image.BILINEAR)
    canvas = np.zeros((height, width, image.shape[2]), np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top : top + new_h, left : left + new_w] = np.asarray(resized)
    return canvas


def resize_with_pad(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """Letterbox ``uint8 (..., h, w, 3)`` images into ``uint8 (..., height, width, 3)``.

    Leading dimensions (envs, time) are kept; an image already of the target size is returned
    as is (not copied).

    Raises:
        ValueError: not a uint8 array of shape ``(..., h, w, 3)``.
    """
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim < 3 or images.shape[-1] != 3:
        raise ValueError(f"expected uint8 (..., h, w, 3) images, got {images.dtype} {images.shape}")
    if images.shape[-3:-1] == (height, width):
        return images
    if images.ndim == 3:
        return _resize_one(images, height, width)
    flat = images.reshape((-1,) + images.shape[-3:])
    out = np.stack([_resize_one(np.ascontiguousarray(img), height, width) for img in flat])
    return out.reshape(images.shape[:-3] + (height, width, 3))


#: The same operation under the name GR00T and DreamZero use for it.
letterbox = resize_with_pad


def half_size(image: np.ndarray) -> np.ndarray:
    """``uint8 (h // 2, w // 2, C)``: the rounded mean of each 2 x 2 block of ``uint8 (h, w, C)``.

    Equals bilinear downsampling by exactly 2 with half-pixel centres (torch
    ``F.interpolate(scale_factor=0.5, mode="bilinear", align_corners=False)``, which Arena's
    Cosmos client uses).

    Raises:
        ValueError: odd height or width.
    """
    h, w = image.shape[:2]
    if h % 2 or w % 2:
        raise ValueError(f"half_size needs an even height and width, got {h} x {w}")
    blocks = image.reshape(h // 2, 2, w // 2, 2, -1).astype(np.float32)
    return np.rint(blocks.mean(axis=(1, 3))).astype(np.uint8)


#: Float images may stray this far outside [0, 1] (rendering noise, augmentation) and are
#: clipped; anything further out is refused rather than guessed at.
FLOAT_TOLERANCE = 0.05


def to_uint8(image: np.ndarray, name: str = "image") -> np.ndarray:
    """The one conversion of camera images to ``uint8`` for every adapter (and for videos).

    - ``uint8``: returned as is (no copy).
    - float in [0, 1] (values up to :data:`FLOAT_TOLERANCE` outside are clipped to it):
      ``255 * x`` truncated, as openpi's ``convert_to_uint8`` does for in-range values.
    - other integer dtypes (``int64``, ``uint16``, …) whose values all lie in 0..255: cast
      (nothing changes value).

    Anything else is refused, never wrapped around (``uint8(255 * 1.02)`` would be pixel 4):
    float images outside [0, 1] (e.g. 0..255 floats: cast them in the environment), NaN or
    infinity, integer values outside 0..255 (a 16-bit image: scale it in the environment),
    booleans and non-numeric arrays. ``name`` (e.g. ``camera_obs['wrist_camera_rgb']``)
    names the image in the message.

    Raises:
        ObservationError: the image cannot be converted without changing what it shows.
    """
    image = np.asarray(image)
    dtype = image.dtype
    if dtype == np.uint8:
        return image
    if np.issubdtype(dtype, np.floating):
        if image.size == 0:
            return image.astype(np.uint8)
        low, high = float(np.min(image)), float(np.max(image))
        if not (np.isfinite(low) and np.isfinite(high)):
            raise _refuse(name, dtype, "holds NaN or infinite values")
        if low < -FLOAT_TOLERANCE or high > 1 + FLOAT_TOLERANCE:
            raise _refuse(
                name, dtype, f"has values in [{low:g}, {high:g}]; float images must be in [0, 1] "
                "(for 0..255 floats, cast to uint8 in the environment)"
            )
        return (255 * np.clip(image, 0.0, 1.0)).astype(np.uint8)
    if np.issubdtype(dtype, np.integer):
        if image.size and (int(np.min(image)) < 0 or int(np.max(image)) > 255):
            raise _refuse(
                name, dtype, f"has values in [{int(np.min(image))}, {int(np.max(image))}]; integer images "
                "must be in 0..255 (scale 16-bit images to uint8 in the environment)"
            )
        return image.astype(np.uint8)
    raise _refuse(name, dtype, "is not a numeric image")


def _refuse(name: str, dtype: np.dtype, why: str) -> ObservationError:
    return ObservationError(f"{name} ({dtype}) {why}; arena sends uint8 images and never wraps pixel values around")
