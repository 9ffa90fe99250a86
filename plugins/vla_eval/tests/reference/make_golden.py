"""Writes ``openvla_center_crop_golden.npz``: what OpenVLA's ``get_vla_action`` hands its
processor for the frames of :func:`frames` with ``center_crop=True`` (TensorFlow's crop).

Run with a Python that has TensorFlow, NumPy and Pillow (not arena), from this folder::

    python -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu pillow
    /tmp/tfvenv/bin/python make_golden.py

The golden file in the repository came from tensorflow-cpu 2.21.0, NumPy and Pillow as pip
resolved them on 2026-12-07 (x86_64 CPU).
"""

from __future__ import annotations

import numpy as np


def frames() -> np.ndarray:
    """``uint8 (3, 224, 224, 3)``: a sharp pattern, a smooth gradient and a checkerboard, made
    without a random generator so that any NumPy builds the same inputs."""
    y, x, c = np.mgrid[0:224, 0:224, 0:3]
    sharp = (x * 7 + y * 13 + c * 101 + (x * y) % 251) % 256
    smooth = (x + y + 40 * c) % 256
    checker = ((x // 3 + y // 5) % 2) * 255 - c * 20 % 256
    return np.stack([sharp, smooth, np.clip(checker, 0, 255)]).astype(np.uint8)


def reference_crops(images: np.ndarray) -> np.ndarray:
    """``uint8 (N, 224, 224, 3)``: the image OpenVLA's processor receives for each frame."""
    import openvla_utils_c8f03f4 as ov

    seen: list[np.ndarray] = []

    class Processor:  # stands in for the HF processor: keeps the PIL image it is given
        def __call__(self, prompt, image):
            seen.append(np.asarray(image))
            return self

        def to(self, *args, **kwargs):
            return {}

    class Vla:
        def predict_action(self, **kwargs):
            return np.zeros(7)

    for image in images:
        ov.get_vla_action(Vla(), Processor(), "openvla-7b", {"full_image": image}, "task", "libero_spatial", center_crop=True)
    return np.stack(seen)


if __name__ == "__main__":
    import tensorflow as tf

    crops = reference_crops(frames())
    np.savez_compressed("openvla_center_crop_golden.npz", crops=crops, tensorflow=tf.__version__)
    print("wrote", crops.shape, "with TensorFlow", tf.__version__)
