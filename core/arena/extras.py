"""Optional dependencies of arena-core (its extras) and the error that names the missing one.

arena-core itself needs no simulator: importing ``arena``, ``arena validate`` and environment
workers of plugins run without them. The built-in simulators and video encoding are extras:

- ``metaworld``: MuJoCo + Meta-World (``environment.type: metaworld``, the expert server);
- ``kitchen``: MuJoCo + Gymnasium-Robotics (``franka_kitchen``);
- ``video``: PyAV (``recording``);
- ``sim``: all built-in simulators and video (what ``scripts/setup-env.sh`` installs).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from arena.errors import ArenaError


class MissingExtraError(ArenaError, ImportError):
    """A feature needs an optional dependency that is not installed; the message says which extra."""


def import_extra(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` (e.g. ``"metaworld"``), needed for ``what`` from extra ``extra``.

    Raises:
        MissingExtraError: it is not installed; the message names ``pip install 'arena-core[EXTRA]'``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module).split(".")[0]
        raise MissingExtraError(
            f"{what} needs the Python package '{missing}', which is not installed: pip install 'arena-core[{extra}]'"
        ) from exc
