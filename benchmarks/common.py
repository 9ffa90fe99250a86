"""Shared helpers: the DROID request, repeat/median timing, the table printer."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def droid_request(seed: int = 0) -> dict[str, Any]:
    """Two 224x224x3 uint8 images, 7 joints, 1 gripper and a prompt: 301,439 bytes packed."""
    rng = np.random.default_rng(seed)
    return {
        "observation/exterior_image_1_left": rng.integers(0, 255, (224, 224, 3), np.uint8),
        "observation/wrist_image_left": rng.integers(0, 255, (224, 224, 3), np.uint8),
        "observation/joint_position": rng.random(7),
        "observation/gripper_position": rng.random(1),
        "prompt": "pick",
    }


def time_per_call(fn: Callable[[], Any], iterations: int) -> float:
    """Mean seconds per call of ``fn`` over ``iterations`` calls."""
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations


def interleaved_medians(
    cases: dict[str, Callable[[], Any]], iterations: int, repeats: int, warmup: int = 10
) -> dict[str, float]:
    """Seconds per call of each case: the median over ``repeats`` of each repeat's median call.

    Within a repeat the cases take turns call by call, in a new random order each turn (so no
    case always follows the same other case), a burst of load from other processes hits them
    alike, and medians ignore the calls such a burst stretches.
    """
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    per_repeat: dict[str, list[float]] = {name: [] for name in cases}
    clock = time.perf_counter
    order = list(cases.items())
    shuffle = random.Random(0).shuffle
    for _ in range(repeats):
        calls: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(iterations):
            shuffle(order)
            for name, fn in order:
                start = clock()
                fn()
                calls[name].append(clock() - start)
        for name, values in calls.items():
            per_repeat[name].append(statistics.median(values))
    return {name: statistics.median(values) for name, values in per_repeat.items()}


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured markdown table."""
    text = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in text)])
