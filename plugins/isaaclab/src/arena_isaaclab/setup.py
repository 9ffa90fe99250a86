"""``arena isaaclab setup``: the Python 3.12 venv the simulator runs in.

Isaac Lab 3 requires Python 3.12 and pins torch 2.11; arena itself may run on 3.11. The venv
(``$ARENA_VENVS/isaaclab``, :mod:`arena.venvs`) holds arena-core without the built-in
simulators' extras, this plugin with its ``[sim]`` extra (the packages a kit-less Isaac Lab run
imports: torch, Warp, Newton, MuJoCo-Warp, OpenUSD, Hydra), and ``isaaclab`` itself, installed
``--no-deps`` (its own requirements are the full 7.8 GB set: RTX tooling, open3d,
transformers, RL libraries; ``--full`` installs those too). Running it again does nothing
unless something changed (:func:`arena.venvs.ensure_venv`'s stamp, then a version check).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from arena.venvs import VenvError, ensure_venv, venv_python
from arena_isaaclab import VENV_NAME

DISTRIBUTION = "arena-plugin-isaaclab"
#: The Isaac Lab release the ``[sim]`` extra's pins belong to.
ISAACLAB_REQUIREMENT = "isaaclab==3.0.0"
#: Environment variable naming the Python 3.12 interpreter to build the venv from.
PYTHON_ENV = "ARENA_ISAACLAB_PYTHON"


def python_version(python: str) -> str | None:
    """``X.Y`` of interpreter ``python``, or ``None`` when it does not run."""
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def find_python312() -> str | None:
    """A Python 3.12 interpreter: ``$ARENA_ISAACLAB_PYTHON``, ``python3.12`` on ``PATH``, pyenv's
    (``$PYENV_ROOT`` or ``~/.pyenv``), then ``/usr/bin`` and ``/usr/local/bin``; ``None`` if none runs."""
    candidates = [os.environ.get(PYTHON_ENV), shutil.which("python3.12")]
    pyenv_root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(pyenv_root, "versions", "3.12*", "bin", "python3.12")), reverse=True)
    candidates += ["/usr/bin/python3.12", "/usr/local/bin/python3.12"]
    for candidate in candidates:
        if candidate and python_version(candidate) == "3.12":
            return candidate
    return None


def sim_requirements() -> list[str]:
    """The ``[sim]`` extra's requirements of the installed plugin, without their markers."""
    out = []
    for text in metadata.requires(DISTRIBUTION) or []:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": "sim"}) and not req.marker.evaluate({"extra": ""}):
            req.marker = None
            out.append(str(req))
    return out


def installed_version(python: str | os.PathLike[str], distribution: str) -> str | None:
    """The version of ``distribution`` installed for ``python``, or ``None``."""
    code = f"import importlib.metadata as m\ntry: print(m.version({distribution!r}))\nexcept m.PackageNotFoundError: pass"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or None


def setup(python: str | None = None, *, full: bool = False, quiet: bool = False) -> Path:
    """Create or update the Isaac Lab venv; return its interpreter.

    Raises:
        VenvError: no Python 3.12 was found (or ``python`` is not 3.12), or an install failed.
    """
    base = python or find_python312()
    if base is None:
        raise VenvError(
            "Isaac Lab needs Python 3.12 and none was found (looked at $ARENA_ISAACLAB_PYTHON, "
            "python3.12 on PATH, pyenv's versions, /usr/bin, /usr/local/bin): install one "
            "(e.g. `pyenv install 3.12`) or pass --python"
        )
    version = python_version(base)
    if version != "3.12":
        raise VenvError(f"{base} is Python {version or '(does not run)'}; Isaac Lab 3 needs Python 3.12")
    interpreter = ensure_venv(VENV_NAME, python=base, packages=[DISTRIBUTION], requirements=sim_requirements(), quiet=quiet)
    wanted = Requirement(ISAACLAB_REQUIREMENT)
    have = installed_version(interpreter, wanted.name)
    if have is None or have not in wanted.specifier or full:
        argv = [str(interpreter), "-m", "pip", "install", *(["-q"] if quiet else [])]
        argv += [ISAACLAB_REQUIREMENT] if full else ["--no-deps", ISAACLAB_REQUIREMENT]
        if not quiet:
            print(f"arena: {' '.join(argv)}", file=sys.stderr, flush=True)
        done = subprocess.run(argv, capture_output=quiet, text=True)
        if done.returncode != 0:
            tail = "\n".join(((done.stderr or "") + (done.stdout or "")).strip().splitlines()[-20:])
            raise VenvError(f"`{' '.join(argv)}` failed with exit code {done.returncode}:\n{tail}")
    return interpreter


def existing() -> Path | None:
    """The Isaac Lab venv's interpreter if the venv exists, else ``None``."""
    path = venv_python(VENV_NAME)
    return path if path.exists() else None
