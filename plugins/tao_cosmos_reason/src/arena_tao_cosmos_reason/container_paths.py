"""Container mounts and host-to-container path translation (spec §3.14)."""

from __future__ import annotations

import os

from arena_tao_cosmos_reason.errors import CosmosPlanError


def parse_mount(mount: str) -> dict:
    """``SOURCE:TARGET[:OPTIONS]`` -> ``{source, target, options, text}``."""
    parts = mount.split(":")
    if len(parts) < 2 or len(parts) > 3 or not parts[0] or not parts[1]:
        raise CosmosPlanError(f"container mount must be SOURCE:TARGET[:OPTIONS], got {mount!r}")
    return {"source": os.path.normpath(parts[0]), "target": os.path.normpath(parts[1]),
            "options": parts[2] if len(parts) == 3 else "", "text": mount}


def translate(host_path: str, mounts: list[dict], strict: bool) -> str:
    """Re-root ``host_path`` under the mount whose source is its longest prefix.

    URIs pass through. With ``strict`` (SLURM) an uncovered path is an error; otherwise the
    host path is returned unchanged (Docker).
    """
    if not host_path or "://" in host_path:
        return host_path
    resolved = os.path.normpath(os.path.abspath(os.path.expanduser(host_path)))
    best = None
    for mount in mounts:
        src = mount["source"]
        if resolved == src or resolved.startswith(src.rstrip("/") + "/"):
            if best is None or len(src) > len(best["source"]):
                best = mount
    if best is None:
        if strict:
            raise CosmosPlanError(f"runtime path is not covered by a container mount: {host_path}")
        return resolved
    rest = os.path.relpath(resolved, best["source"])
    return best["target"] if rest == "." else f"{best['target'].rstrip('/')}/{rest}"


def path_identity(value: str) -> dict:
    """``{original, expanded, resolved, exists, kind}`` plus parent facts for missing outputs."""
    expanded = os.path.expanduser(value) if value else value
    exists = bool(value) and os.path.exists(expanded)
    record = {"original": value, "expanded": expanded, "resolved": os.path.realpath(expanded) if exists else None,
              "exists": exists, "kind": "directory" if exists and os.path.isdir(expanded) else "file" if exists else "missing"}
    if value and not exists:
        parent = os.path.abspath(expanded)
        while parent and not os.path.exists(parent):
            nxt = os.path.dirname(parent)
            if nxt == parent:
                break
            parent = nxt
        record["nearest_existing_parent"] = parent if os.path.exists(parent) else None
        record["parent_writable"] = bool(record["nearest_existing_parent"]) and os.access(parent, os.W_OK)
    return record
