"""Provenance of an experiment: what produced these numbers (``<output_dir>/provenance.json``).

Written by ``arena run`` before the runs start; ``arena run --resume`` appends to ``resumes``.
Fields: ``arena_version``, ``python``, ``platform``, ``hostname``, ``argv``, ``cwd``,
``started_at``, ``git`` (``commit``, ``dirty``, ``root`` of the repository holding the
experiment file, or ``null`` outside git), ``experiment_file``, ``plugins``
(``[{name, distribution, version}]`` of the loaded non-builtin plugins), ``broken_plugins``
(``[{name, error}]``), ``rendering`` (MuJoCo's OpenGL platform: ``mujoco_gl``, ``chosen_by``
``user`` or ``arena``, ``reason``; see :mod:`arena.rendering`), ``resumes``
(``[{at, hostname, argv, keep_errors}]``), ``servers`` (per run with a server arena starts:
``bind``, ``exposed``, ``api_key`` — ``generated``, ``user`` or ``none`` — ``authenticated``
and the variable names involved; never a key). Each run's ``run_result.json`` adds the
``machine`` it ran on (a cluster node, not the submitting host).
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from arena.outputs.layout import PROVENANCE_FILE
from arena.outputs.records import read_json, utc_now, write_json_atomic


def arena_version() -> str | None:
    try:
        return metadata.version("arena-core")
    except metadata.PackageNotFoundError:
        return None


def git_info(path: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    """``{"commit", "dirty", "root"}`` of the git repository holding ``path`` (a file or dir)."""
    where = Path(path) if path is not None else Path.cwd()
    where = where if where.is_dir() else where.parent
    if not where.exists():
        return None

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(where), *args], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status), "root": git("rev-parse", "--show-toplevel")}


def plugin_versions(manager: Any = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(plugins, broken)`` of the plugin manager (default: the process-wide one)."""
    if manager is None:
        from arena.plugins import get_plugin_manager

        manager = get_plugin_manager()
    try:
        manager.registry
    except Exception:  # a broken registry is reported elsewhere; provenance stays best effort
        pass
    plugins = [
        {"name": i.name, "distribution": i.distribution, "version": i.version}
        for i in getattr(manager, "infos", {}).values()
        if not getattr(i, "builtin", False)
    ]
    broken = [{"name": b.name, "error": b.error} for b in getattr(manager, "broken", [])]
    return plugins, broken


def collect_provenance(
    experiment_file: str | os.PathLike[str] | None = None, manager: Any = None, servers: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The provenance of an ``arena run`` started now from this process (``servers``: the
    exposure of each run's server, see the module doc)."""
    from arena.rendering import configure_headless_rendering, rendering_info

    plugins, broken = plugin_versions(manager)
    configure_headless_rendering()  # what the runs started from here inherit
    return {
        "arena_version": arena_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "started_at": utc_now(),
        "experiment_file": str(experiment_file) if experiment_file else None,
        "git": git_info(experiment_file),
        "plugins": plugins,
        "broken_plugins": broken,
        "rendering": rendering_info(),
        "servers": dict(servers or {}),
        "resumes": [],
    }


def write_provenance(
    output_dir: str | os.PathLike[str], experiment_file: str | None = None, *, servers: dict[str, Any] | None = None
) -> Path:
    """Write ``<output_dir>/provenance.json`` for a new run of the experiment."""
    data = collect_provenance(experiment_file, servers=servers)
    return write_json_atomic(Path(output_dir) / PROVENANCE_FILE, data)


def note_resume(output_dir: str | os.PathLike[str], keep_errors: bool) -> Path:
    """Append this resume to ``provenance.json`` (created if the directory has none)."""
    path = Path(output_dir) / PROVENANCE_FILE
    data = read_json(path)
    if not isinstance(data, dict):
        data = collect_provenance(None)
    resumes = data.get("resumes") if isinstance(data.get("resumes"), list) else []
    resumes.append({"at": utc_now(), "hostname": socket.gethostname(), "argv": list(sys.argv), "keep_errors": keep_errors})
    data["resumes"] = resumes
    return write_json_atomic(path, data)


def read_provenance(output_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    data = read_json(Path(output_dir) / PROVENANCE_FILE)
    return data if isinstance(data, dict) else None
