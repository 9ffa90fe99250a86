"""Fresh per-user directories for a test session, the way a new machine starts.

Libraries keep caches, configuration and credentials under the user's home: ``~/.cache``
(pip, Mesa's shader cache, Warp's kernels), ``$HF_HOME`` (Hugging Face), ``$TORCH_HOME``,
``~/.config``. A suite that lets them write there passes or fails by what an earlier run
left behind, and changes the user's machine. :func:`fresh_user_dirs` returns the environment
that points every such location at a new, empty folder; the pytest plugin
(:mod:`arena.testing.pytest_plugin`, ini option ``arena_fresh_user_dirs = true``) applies it
to the whole session before any test module is imported, and ``.ci/run`` applies it (through
``python3 core/arena/testing/user_dirs.py ROOT``) to the whole CI job.

What a suite needs on purpose is named explicitly and stays where it is: pyenv's interpreters
(``PYENV_ROOT``, which pyenv otherwise finds through ``HOME``); variables this module does not
list (``ARENA_VENVS``, ``ARENA_WARP_CACHE``, ``PIP_FIND_LINKS``, ...) are left alone. Standard
library only: ``.ci/run`` runs this file before any environment exists.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

#: Variable -> folder under the fresh root. Every per-user location a test, or a library it
#: calls, could write to: the XDG base directories cover most tools (pip, Mesa, Warp,
#: matplotlib, fsspec); the others are named here because a user may have set them to a
#: folder outside ``HOME``.
USER_DIRS: dict[str, str] = {
    "HOME": "home",
    "XDG_CACHE_HOME": "cache",
    "XDG_CONFIG_HOME": "config",
    "XDG_DATA_HOME": "data",
    "XDG_STATE_HOME": "state",
    "PIP_CACHE_DIR": "cache/pip",
    "HF_HOME": "cache/huggingface",
    "HF_HUB_CACHE": "cache/huggingface/hub",
    "HUGGINGFACE_HUB_CACHE": "cache/huggingface/hub",
    "HF_ASSETS_CACHE": "cache/huggingface/assets",
    "HF_XET_CACHE": "cache/huggingface/xet",
    "HF_DATASETS_CACHE": "cache/huggingface/datasets",
    "HF_TOKEN_PATH": "cache/huggingface/token",
    "HF_STORED_TOKENS_PATH": "cache/huggingface/stored_tokens",
    "TORCH_HOME": "cache/torch",
    "TORCHINDUCTOR_CACHE_DIR": "cache/torchinductor",
    "TRITON_CACHE_DIR": "cache/triton",
    "CUDA_CACHE_PATH": "cache/nv",
    "MPLCONFIGDIR": "config/matplotlib",
    "WARP_CACHE_PATH": "cache/warp",
    "MESA_SHADER_CACHE_DIR": "cache/mesa_shader_cache",
}

#: Set in every fresh session: no telemetry leaves a test.
QUIET: dict[str, str] = {"HF_HUB_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}

#: Marks an environment this module made (its value is the root), so a nested session (a test
#: that runs pytest) does not start over.
MARKER = "ARENA_FRESH_USER_DIRS"


def fresh_user_dirs(root: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables to set so that every per-user location lies under ``root``.

    Creates ``root/home`` (some tools refuse a missing home). ``environ`` (default
    ``os.environ``) is read for what is kept: pyenv's root, which is found through ``HOME``
    when unset, is named explicitly so the interpreters stay reachable.

    Returns:
        ``{variable: value}`` with every key of :data:`USER_DIRS` and :data:`QUIET`, plus
        ``PYENV_ROOT`` when pyenv is installed, plus :data:`MARKER`.
    """
    environ = os.environ if environ is None else environ
    root = Path(root).absolute()
    values = {name: str(root / rel) for name, rel in USER_DIRS.items()}
    (root / USER_DIRS["HOME"]).mkdir(parents=True, exist_ok=True)
    pyenv = environ.get("PYENV_ROOT") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".pyenv")
    if os.path.isdir(pyenv):
        values["PYENV_ROOT"] = pyenv
    values.update(QUIET)
    values[MARKER] = str(root)
    return values


def apply(root: str | os.PathLike[str]) -> dict[str, str]:
    """Set :func:`fresh_user_dirs` in ``os.environ`` (this process and what it starts); returns it."""
    values = fresh_user_dirs(root)
    os.environ.update(values)
    return values


def main(argv: list[str]) -> int:
    """``python3 user_dirs.py ROOT``: print ``export NAME=VALUE`` lines for a shell to eval.

    :data:`MARKER` is left out: a pytest session started from that shell still makes its own.
    """
    if len(argv) != 1:
        print("usage: user_dirs.py ROOT  (prints export lines pointing every per-user directory under ROOT)",
              file=sys.stderr)
        return 2
    for name, value in fresh_user_dirs(argv[0]).items():
        if name != MARKER:
            print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
