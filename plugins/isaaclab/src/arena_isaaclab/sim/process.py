"""What must be set in the worker process before Isaac Lab is first imported.

Isaac Lab reads its asset root (``ISAACSIM_ASSET_ROOT``) into module constants at import, and
Warp picks its kernel cache (``WARP_CACHE_PATH``) when it initializes, so both are set here,
once per process, before anything imports ``isaaclab`` or ``warp``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from arena.errors import ArenaError

#: Environment variable naming the Warp kernel cache for every Isaac Lab worker.
WARP_CACHE_ENV = "ARENA_WARP_CACHE"


class IsaacLabSetupError(ArenaError):
    """Isaac Lab cannot run in this process as configured (the message says what to do)."""


def kernel_cache_dir(configured: str | None) -> Path:
    """Where Warp keeps compiled kernels: ``configured``, else ``$ARENA_WARP_CACHE``, else
    ``warp-kernels`` inside this interpreter's venv (``sys.prefix``) — so kernels compile once
    per venv and never land in ``~/.cache``."""
    chosen = configured or os.environ.get(WARP_CACHE_ENV)
    return Path(chosen).expanduser() if chosen else Path(sys.prefix) / "warp-kernels"


def prepare(asset_root: str | None, kernel_cache: str | None) -> None:
    """Point Isaac Lab at ``asset_root`` and Warp at its kernel cache.

    Raises:
        IsaacLabSetupError: Isaac Lab was already imported in this process with another asset
            root, or Warp was already initialized with another kernel cache.
    """
    cache = kernel_cache_dir(kernel_cache)
    cache.mkdir(parents=True, exist_ok=True)
    warp = sys.modules.get("warp")
    if warp is None:
        os.environ["WARP_CACHE_PATH"] = str(cache)
    else:
        current = getattr(getattr(warp, "config", None), "kernel_cache_dir", None)
        if current is None:
            warp.config.kernel_cache_dir = str(cache)
        elif Path(current).resolve() != cache.resolve():
            raise IsaacLabSetupError(
                f"Warp is already initialized with kernel cache {current} in this process; "
                f"cannot switch to {cache}"
            )
    if asset_root is None:
        return
    root = str(Path(asset_root).expanduser()).rstrip("/")
    assets = sys.modules.get("isaaclab.utils.assets")
    if assets is not None and getattr(assets, "NUCLEUS_ASSET_ROOT_DIR", None) != root:
        raise IsaacLabSetupError(
            f"Isaac Lab was imported in this process with asset root {assets.NUCLEUS_ASSET_ROOT_DIR!r} "
            f"before asset_root {root!r} could be set; build the environment in a fresh process "
            "(an environment worker does)"
        )
    os.environ["ISAACSIM_ASSET_ROOT"] = root
