"""``arena doctor``'s Vulkan check for ManiSkill3: can the ``maniskill`` venv's SAPIEN render?

SAPIEN renders ManiSkill's cameras through Vulkan. The probe runs in a child process under
the venv's interpreter (only that venv has SAPIEN; a crashing driver cannot take arena down):
it prints SAPIEN's device summary (``sapien.render.get_device_summary()``: each Vulkan device
and whether SAPIEN supports it) and creates a render system, as ManiSkill does for its first
camera. On a CPU machine the device is Mesa's lavapipe (``llvmpipe``): Mesa 25.0 from Debian's
bookworm-backports works; bookworm's own 22.3 fails with 'Failed to find a supported physical
device "cpu"' (``reference/lerobot-maniskill.md``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from arena.doctor import Check

NAME = "maniskill Vulkan"
TIMEOUT_S = 120.0
#: What fixes a missing or unsupported Vulkan device on Debian bookworm (what .ci/setup.d/vulkan.sh does).
FIX = (
    "CPU (Debian bookworm): add bookworm-backports to apt's sources and "
    "`apt-get install -t bookworm-backports libvulkan1 mesa-vulkan-drivers` (Mesa >= 25; bookworm's 22.3 "
    "lavapipe fails), as .ci/setup.d/vulkan.sh does; GPU node: the NVIDIA driver's Vulkan ICD "
    "(/usr/share/vulkan/icd.d/nvidia_icd.json, e.g. libnvidia-gl) "
)

_PROBE = """
import sapien.render as r
summary = r.get_device_summary()
print(summary.replace(chr(10), ' | '))
r.RenderSystem()
print('RENDER-OK')
"""


def vulkan_check(python: Path, timeout_s: float = TIMEOUT_S) -> Check:
    """``ok`` with the device SAPIEN renders on; ``fail`` (with :data:`FIX`) when the probe
    finds no supported device, cannot create a render system, crashes or hangs."""
    try:
        done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return Check(NAME, "fail", f"{python}: SAPIEN's Vulkan probe gave no answer in {timeout_s:g} s", FIX)
    except OSError as exc:
        return Check(NAME, "fail", f"{python} does not run: {exc}", "arena venv setup maniskill")
    lines = done.stdout.strip().splitlines()
    summary = lines[0] if lines else ""
    devices = [part.strip() for part in summary.split("|") if part.strip().startswith(("GPU:", "CPU:"))]
    if done.returncode != 0 or "RENDER-OK" not in lines:
        error = (done.stderr.strip().splitlines() or ["no output"])[-1]
        seen = f"devices: {', '.join(devices)}; " if devices else "no Vulkan device; "
        return Check(NAME, "fail", f"SAPIEN cannot render ({seen}{error})", FIX)
    supported = "Supported: 1" in summary
    state = "supported" if supported else "not marked supported"
    detail = f"SAPIEN renders on {', '.join(devices) or 'an unnamed device'} ({state} in its device summary)"
    return Check(NAME, "ok" if supported else "warn", detail, None if supported else FIX)
