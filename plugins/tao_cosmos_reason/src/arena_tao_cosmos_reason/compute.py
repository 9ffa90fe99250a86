"""Compute inputs: child timeout, Docker GPU discovery and GPU architecture (spec §3.12)."""

from __future__ import annotations

import os
import re
import subprocess

from arena_tao_cosmos_reason.errors import CosmosPlanError

GPU_ARCHITECTURES = ("a100", "h100", "h200", "b200", "gb200")
MIN_DOCKER_GPU_MIB = 16 * 1024


def timeout_seconds(value: str) -> int:
    """``HH:MM:SS`` -> seconds (minutes and seconds < 60, total > 0)."""
    match = re.fullmatch(r"(\d+):(\d\d):(\d\d)", value or "")
    if not match:
        raise CosmosPlanError(f"child timeout must use HH:MM:SS format: timeout={value!r}")
    hours, minutes, seconds = (int(g) for g in match.groups())
    if minutes >= 60 or seconds >= 60:
        raise CosmosPlanError(f"child timeout must use valid HH:MM:SS fields: timeout={value!r}")
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise CosmosPlanError(f"child timeout must be greater than zero: timeout={value!r}")
    return total


def check_gpu_architecture(value: str) -> None:
    if value.strip().casefold() not in GPU_ARCHITECTURES:
        raise CosmosPlanError(f"unsupported or unvalidated GPU architecture: gpu_architecture={value!r} "
                              f"(one of {', '.join(GPU_ARCHITECTURES)})")


def docker_gpus(requested: int, env=None, run=subprocess.run) -> list[str]:
    """Select Docker GPUs with ``nvidia-smi`` (index, uuid, memory MiB); return their indices.

    ``CUDA_VISIBLE_DEVICES`` tokens are indices or unique ``GPU-`` UUID prefixes; only GPUs
    with at least 16 GiB qualify.
    """
    env = os.environ if env is None else env
    try:
        out = run(["nvidia-smi", "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
                  capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise CosmosPlanError(f"Docker GPU discovery with nvidia-smi failed: {exc}") from None
    gpus = []
    for line in out.strip().splitlines():
        index, uuid, memory = (p.strip() for p in line.split(","))
        gpus.append({"index": index, "uuid": uuid, "memory_mib": float(memory)})
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        if visible.strip() in ("", "-1"):
            raise CosmosPlanError("CUDA_VISIBLE_DEVICES exposes no Docker training GPUs")
        chosen = []
        for token in (t.strip() for t in visible.split(",")):
            if not token:
                raise CosmosPlanError("CUDA_VISIBLE_DEVICES contains an empty token")
            matches = [g for g in gpus if g["index"] == token or (token.startswith("GPU-") and g["uuid"].startswith(token))]
            if len(matches) != 1:
                raise CosmosPlanError(f"CUDA_VISIBLE_DEVICES token {token!r} does not resolve to one GPU")
            if matches[0] in chosen:
                raise CosmosPlanError(f"CUDA_VISIBLE_DEVICES selects GPU {matches[0]['index']} twice")
            chosen.append(matches[0])
        gpus = chosen
    eligible = [g["index"] for g in gpus if g["memory_mib"] >= MIN_DOCKER_GPU_MIB]
    want = requested if requested > 0 else len(eligible)
    if want == 0 or len(eligible) < want:
        raise CosmosPlanError(f"Docker host has {len(eligible)} eligible GPUs (>=16 GiB); {want} requested "
                              f"(gpus_per_node={requested}, 0 = every eligible GPU)")
    return eligible[:want]
