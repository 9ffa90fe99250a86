"""Container mounts, host-to-container path translation and the container's view of the run
(spec §3.14, §7.4, §7.12).

Every host path the container reads (model, annotations, media, override artifacts) or writes
(results, checkpoints, cache) is an :class:`Access`. :func:`runtime_mounts` turns the explicit
``container_mount`` list into the mounts the job really gets: on SLURM an access that no mount
covers refuses the plan, naming its field; on Docker it gets a mount at the same path (inputs
read-only), and the four container defaults (``/results``, ``/results/checkpoints``, ``/cache``,
``/specs``) are mounted from their host folders. The plan carries the accesses, so preflight and
evaluation can check them again against the mounts the render uses.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from arena_tao_cosmos_reason.errors import CosmosPlanError

INPUT, OUTPUT = "input", "output"


def parse_mount(mount: str) -> dict:
    """``SOURCE:TARGET[:OPTIONS]`` -> ``{source, target, options, text}``."""
    parts = mount.split(":")
    if len(parts) < 2 or len(parts) > 3 or not parts[0] or not parts[1]:
        raise CosmosPlanError(f"container mount must be SOURCE:TARGET[:OPTIONS], got {mount!r} (container_mount)")
    return {"source": os.path.normpath(parts[0]), "target": os.path.normpath(parts[1]),
            "options": parts[2] if len(parts) == 3 else "", "text": mount}


def _host(path: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def covering_mount(host_path: str, mounts: list[dict]) -> dict | None:
    """The mount whose source is the longest prefix of ``host_path`` (lexically), or ``None``."""
    resolved = _host(host_path)
    best = None
    for mount in mounts:
        src = mount["source"]
        if resolved == src or resolved.startswith(src.rstrip("/") + "/"):
            if best is None or len(src) > len(best["source"]):
                best = mount
    return best


def translate(host_path: str, mounts: list[dict], strict: bool, field: str | None = None) -> str:
    """Re-root ``host_path`` under the mount whose source is its longest prefix.

    URIs pass through. With ``strict`` (SLURM) an uncovered path is an error naming ``field``;
    otherwise the host path is returned unchanged (Docker, where :func:`runtime_mounts` mounts it
    at the same path).
    """
    if not host_path or "://" in host_path:
        return host_path
    best = covering_mount(host_path, mounts)
    resolved = _host(host_path)
    if best is None:
        if strict:
            where = f"{field}={host_path}" if field else host_path
            raise CosmosPlanError(f"runtime path is not covered by a container mount: {where} "
                                  "(add a container_mount whose SOURCE contains it)")
        return resolved
    rest = os.path.relpath(resolved, best["source"])
    return best["target"] if rest == "." else f"{best['target'].rstrip('/')}/{rest}"


@dataclass(frozen=True)
class Access:
    """One host path the container uses: ``role`` is ``input`` (read) or ``output`` (written);
    ``same_path`` means the container must see it at the host path itself (absolute media
    references written inside annotation files are never translated)."""

    field: str
    host: str
    role: str
    same_path: bool = False


def _mount_text(source: str, target: str, read_only: bool) -> str:
    return f"{source}:{target}:ro" if read_only else f"{source}:{target}"


def runtime_mounts(platform: str, explicit: list[str], accesses: list[Access],
                   docker_defaults: list[tuple[str, str, str, bool]] = ()) -> list[dict]:
    """The mounts the container gets, covering every access (see the module docstring).

    Args:
        platform: ``slurm`` or ``docker``.
        explicit: the user's ``container_mount`` strings.
        accesses: every host path the container reads or writes.
        docker_defaults: ``(field, host, container_target, read_only)`` mounts Docker adds for the
            container defaults unless a mount already targets them.

    Raises:
        CosmosPlanError: on SLURM, an access no mount covers, or an access the container must
            see at its own path that a mount moves elsewhere (names the field and the mount); on
            Docker, a container default that an explicit mount points at another host folder.
    """
    mounts = [parse_mount(m) for m in explicit]
    if platform == "docker":
        targets = {m["target"] for m in mounts}
        for field, host, target, read_only in docker_defaults:
            if os.path.normpath(target) not in targets:
                mounts.append(parse_mount(_mount_text(_host(host), target, read_only)))
                targets.add(os.path.normpath(target))
            seen = translate(host, mounts, strict=False)
            if seen != os.path.normpath(target):
                raise CosmosPlanError(f"container path {target} is mounted from another host folder than "
                                      f"{field}={host}: drop the container_mount that targets {target}")
        for access in sorted(accesses, key=lambda a: (len(_host(a.host)), a.host)):
            best = covering_mount(access.host, mounts)
            moved = best is not None and access.same_path and translate(access.host, [best], False) != _host(access.host)
            if best is None or moved:
                host = _host(access.host)
                mounts.append(parse_mount(_mount_text(host, host, access.role == INPUT)))
        return mounts
    for access in accesses:
        container = translate(access.host, mounts, strict=True, field=access.field)
        if access.same_path and container != _host(access.host):
            raise CosmosPlanError(
                f"{access.field} references media by absolute path {access.host}, which the container sees at "
                f"{container}: annotations are not rewritten, so mount it at the same path "
                f"(container_mount {access.host}:{access.host}) or make the media paths relative to the media root")
    return mounts


def check_accesses(accesses: list[dict], mounts: list[str]) -> list[str]:
    """Problems (one line each) with a plan's recorded accesses against the mounts a render uses:
    paths no mount covers, and paths the container would see elsewhere than the plan says."""
    parsed = [parse_mount(m) for m in mounts]
    problems = []
    for access in accesses:
        best = covering_mount(access["host"], parsed)
        if best is None:
            problems.append(f"{access['field']}={access['host']} is not covered by any container mount")
            continue
        seen = translate(access["host"], parsed, strict=False)
        if seen != access["container"]:
            problems.append(f"{access['field']}={access['host']} is seen at {seen} in the container, "
                            f"but the plan uses {access['container']}")
    return problems


def access_records(accesses: list[Access], mounts: list[dict], strict: bool) -> list[dict]:
    """JSON records ``{field, host, role, same_path, container}`` for the plan."""
    return [asdict(a) | {"container": translate(a.host, mounts, strict, a.field)} for a in accesses]


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
