"""The GPUs of this machine, handed out to the policy servers the local backend starts.

Each server gets the GPUs it asks for (its ServerTask's ``resources.gpu``, or exactly the
ones ``server.gpus`` pins) as ``CUDA_VISIBLE_DEVICES``, so several servers on one
workstation do not all load onto GPU 0. The GPUs are those of arena's own
``CUDA_VISIBLE_DEVICES`` when it is set (so ``CUDA_VISIBLE_DEVICES=2,3 arena run ...`` lends
arena two GPUs), else the ones ``nvidia-smi -L`` lists. A server that asks for more GPUs than
the machine has fails its runs with a message saying so; one whose GPUs are held by other
servers waits until they are free (it is queued, like a run waiting for a ``jobs`` slot).

The numbers mean what ``nvidia-smi`` says: each server also gets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
(nvidia-smi numbers GPUs in PCI bus order; CUDA's own default, ``FASTEST_FIRST``, differs on a
node with mixed GPU models, so ``gpus: [0]`` could land on another card), unless the user's
environment or the server task's ``env`` sets ``CUDA_DEVICE_ORDER`` itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["GpuPool", "cuda_device_order", "discover_gpus"]

#: The order ``nvidia-smi -L`` numbers GPUs in (NVIDIA's nvidia-smi and CUDA C Programming Guide
#: "CUDA Environment Variables": ``PCI_BUS_ID`` orders by PCI bus ID, ``FASTEST_FIRST`` is the default).
PCI_ORDER = "PCI_BUS_ID"

_NVIDIA_SMI_LINE = re.compile(r"^GPU (\d+):")


def discover_gpus(env: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """``(devices, source)``: the GPUs arena may hand out (``CUDA_VISIBLE_DEVICES`` entries:
    indices or UUIDs) and how they were found, for messages."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = [d.strip() for d in visible.split(",") if d.strip()]
        if devices and devices[0].startswith("-"):  # "-1" hides every GPU
            devices = []
        return devices, f"CUDA_VISIBLE_DEVICES={visible!r}"
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return [], "no nvidia-smi on PATH and CUDA_VISIBLE_DEVICES unset"
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"nvidia-smi -L failed: {exc}"
    devices = [m.group(1) for line in listing.stdout.splitlines() if (m := _NVIDIA_SMI_LINE.match(line.strip()))]
    return devices, "nvidia-smi -L"


def cuda_device_order(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """``(order, why)``: the ``CUDA_DEVICE_ORDER`` a server gets, and why (for messages).

    ``env`` (default ``os.environ``) is the server's environment before arena adds its GPUs.
    """
    env = os.environ if env is None else env
    if env.get("CUDA_DEVICE_ORDER"):
        return env["CUDA_DEVICE_ORDER"], "set by you"
    return PCI_ORDER, "nvidia-smi's numbering"


@dataclass
class GpuPool:
    """Which of ``devices`` are free; ``holders`` maps a held device to its server's name."""

    devices: list[str]
    source: str = ""
    holders: dict[str, str] = field(default_factory=dict)

    def shortage(self, wanted: int, pinned: list[str] | None) -> str | None:
        """Why a server asking for ``wanted`` GPUs (or exactly ``pinned``) can never start
        here, or ``None`` when it can (perhaps after waiting)."""
        if pinned is not None:
            unknown = [d for d in pinned if d not in self.devices]
            if unknown:
                have = ", ".join(self.devices) or "none"
                return f"server.gpus names GPU {', '.join(unknown)}, which this machine does not have (GPUs: {have}; {self.source})"
            return None
        if wanted > len(self.devices):
            return f"it asks for {wanted} GPU(s) and this machine has {len(self.devices)} ({self.source})"
        return None

    def take(self, owner: str, wanted: int, pinned: list[str] | None = None) -> list[str] | None:
        """Reserve ``wanted`` free GPUs (or exactly ``pinned``) for ``owner``; ``None`` while
        some of them are held by other servers."""
        free = [d for d in self.devices if d not in self.holders]
        chosen = list(pinned) if pinned is not None else free[:wanted]
        if len(chosen) < wanted or any(d in self.holders for d in chosen):
            return None
        for device in chosen:
            self.holders[device] = owner
        return chosen

    def give_back(self, devices: list[str]) -> None:
        for device in devices:
            self.holders.pop(device, None)

    def held_by(self, devices: list[str] | None, wanted: int) -> list[str]:
        """Names of the servers holding what a waiting server needs."""
        candidates = devices if devices is not None else self.devices
        return sorted({self.holders[d] for d in candidates if d in self.holders})
