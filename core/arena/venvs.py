"""Benchmark virtual environments: where they live and how a plugin creates them.

Benchmarks pin Python and MuJoCo versions that do not agree with each other or with
arena-core's built-in simulators (LIBERO, ALOHA, Isaac Lab on Python 3.12), so a plugin runs
its environment's workers under the interpreter of the benchmark's own venv (the environment
config's ``python`` key, or the class's ``default_venv``). Such a venv holds arena-core
(without the built-in simulators' extras), the plugin itself and the benchmark.

Location: ``$ARENA_VENVS/<name>``, by default ``${XDG_DATA_HOME:-~/.local/share}/arena/venvs/
<name>``. :func:`ensure_venv` creates or updates one and is cheap when nothing changed: it
writes a stamp (``.arena-stamp``: the base interpreter, the install arguments and the
``pyproject.toml`` of every source directory installed from) and does nothing while the stamp
matches. Plugins build their ``arena NAME setup`` commands on it.

arena-core and the plugin are installed the way they are installed in the running
interpreter: an editable install (pip records its source directory in the distribution's
``direct_url.json``, PEP 610) as editable from the same directory, an install from a local
directory or URL from there, anything else as ``NAME==VERSION`` from the package index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from arena.errors import ArenaError

VENVS_ENV = "ARENA_VENVS"
STAMP_NAME = ".arena-stamp"
CORE_DISTRIBUTION = "arena-core"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class VenvError(ArenaError):
    """A benchmark venv could not be created or updated (the message names the command)."""


def venvs_root() -> Path:
    """The directory holding benchmark venvs: ``$ARENA_VENVS``, else
    ``${XDG_DATA_HOME:-~/.local/share}/arena/venvs``."""
    explicit = os.environ.get(VENVS_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(data).expanduser() / "arena" / "venvs"


def venv_dir(name: str) -> Path:
    """``venvs_root() / name``.

    Raises:
        ValueError: ``name`` is not a plain name (letters, digits, ``_.-``).
    """
    if not _NAME.match(name):
        raise ValueError(f"invalid venv name {name!r}: use letters, digits, '_', '.' and '-'")
    return venvs_root() / name


def venv_python(name: str) -> Path:
    """The interpreter of venv ``name`` (``<dir>/bin/python``); it may not exist yet."""
    return venv_dir(name) / "bin" / "python"


def install_args(distribution: str) -> list[str]:
    """pip arguments that install ``distribution`` as it is installed in this interpreter.

    ``["-e", DIR]`` for an editable install, ``[DIR]`` or ``[NAME @ URL]`` for one from a local
    directory or a URL, else ``["NAME==VERSION"]``.

    Raises:
        VenvError: ``distribution`` is not installed here.
    """
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise VenvError(f"{distribution} is not installed in {sys.executable}") from None
    text = dist.read_text("direct_url.json")
    direct = json.loads(text) if text else None
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        url = direct["url"]
        parsed = urlparse(url)
        if parsed.scheme == "file":
            path = unquote(parsed.path)
            if (direct.get("dir_info") or {}).get("editable"):
                return ["-e", path]
            if Path(path).is_dir():
                return [path]
        if "vcs_info" in direct or "archive_info" in direct:
            return [f"{dist.metadata['Name']} @ {url}"]
    return [f"{dist.metadata['Name']}=={dist.version}"]


def ensure_venv(
    name: str,
    *,
    python: str | os.PathLike[str] | None = None,
    packages: Sequence[str] = (),
    requirements: Sequence[str] = (),
    quiet: bool = False,
) -> Path:
    """Create or update venv ``name`` and return its interpreter's path.

    The venv gets arena-core (without extras: no built-in simulators), the installed
    distributions ``packages`` (e.g. ``["arena-plugin-libero"]``, each as it is installed here,
    see :func:`install_args`) and the pip requirement strings ``requirements`` (e.g.
    ``["gym-aloha==0.1.5"]``), in one ``pip install``. ``python`` is the base interpreter
    (default: this one); a venv made from another one is made again. Nothing runs when the
    stamp matches; concurrent calls for one name wait for each other (a lock file).

    Raises:
        VenvError: creating the venv or ``pip install`` failed, or a package is not installed.
    """
    target = venv_dir(name)
    base = str(Path(python).expanduser()) if python is not None else sys.executable
    args: list[str] = []
    for distribution in (CORE_DISTRIBUTION, *packages):
        args += install_args(distribution)
    args += list(requirements)
    base_id = _interpreter_id(base)
    stamp = _stamp(base_id, args)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{name}.lock"):
        stamp_path = target / STAMP_NAME
        if stamp_path.exists() and stamp_path.read_text() == stamp and venv_python(name).exists():
            return venv_python(name)
        recorded = _read_stamp(stamp_path)
        if target.exists() and (recorded is None or recorded.get("base") != base_id):
            if not (target / "pyvenv.cfg").exists():
                raise VenvError(f"{target} exists but is not a venv; move it away or set ${VENVS_ENV}")
            shutil.rmtree(target)  # made from another interpreter: make it again
        if not target.exists():
            _run([base, "-m", "venv", str(target)], quiet)
        _run([str(venv_python(name)), "-m", "pip", "install", *(["-q"] if quiet else []), *args], quiet)
        stamp_path.write_text(stamp)
    return venv_python(name)


def _interpreter_id(python: str) -> str:
    """``PATH (X.Y.Z)`` of an interpreter, asked from the interpreter itself."""
    try:
        done = subprocess.run(
            [python, "-c", "import platform; print(platform.python_version())"],
            capture_output=True, text=True, timeout=60, check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise VenvError(f"cannot run the interpreter {python}: {exc}") from None
    return f"{python} ({done.stdout.strip()})"


def _stamp(base_id: str, args: list[str]) -> str:
    """What a venv was made from: the interpreter, the install arguments and the hash of every
    source directory's ``pyproject.toml`` (its dependencies may change under an editable install)."""
    digest = hashlib.sha256()
    for arg in args:
        pyproject = Path(arg) / "pyproject.toml"
        if pyproject.is_file():
            digest.update(pyproject.read_bytes())
    return json.dumps({"base": base_id, "install": args, "sources": digest.hexdigest()[:16]}, indent=1)


def _read_stamp(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run(argv: list[str], quiet: bool) -> None:
    if not quiet:
        print(f"arena: {' '.join(argv)}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(argv, capture_output=quiet, text=True, check=False)
    except OSError as exc:
        raise VenvError(f"cannot run {argv[0]}: {exc}") from None
    if done.returncode != 0:
        tail = "\n".join(((done.stderr or "") + (done.stdout or "")).strip().splitlines()[-20:])
        raise VenvError(f"`{' '.join(argv)}` failed with exit code {done.returncode}" + (f":\n{tail}" if tail else ""))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
