"""Stable hashing, atomic file writes and JSON file reads (spec §4.8, §5.2, §5.5).

The stable hash is SHA-256 over UTF-8 JSON with sorted keys, compact separators and
non-ASCII characters kept, so a value hashes the same however it was indented or ordered.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON text with sorted keys, ``(",", ":")`` separators and ``ensure_ascii=False``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def stable_hash(value: Any) -> str:
    """Lower-case hex SHA-256 of :func:`canonical_json` of ``value``."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Lower-case hex SHA-256 of a file's bytes, read in ``chunk``-byte pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def pretty_json(value: Any) -> str:
    """JSON with ``indent=2``, sorted keys and a trailing newline (the on-disk form)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling and ``os.replace``.

    The sibling is ``.<name>.<uuid4hex>.tmp`` in the same folder; it is fsync'ed before the
    replace and always removed, so a crash leaves either the old file or the new one.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, mode: int | None = None) -> Path:
    """:func:`atomic_write_bytes` of UTF-8 ``text``."""
    return atomic_write_bytes(path, text.encode("utf-8"), mode)


def read_json_file(path: str | os.PathLike[str], missing: str, invalid: str) -> Any:
    """The JSON value in the file ``path`` (UTF-8).

    Raises:
        CosmosPlanError: ``missing`` when ``path`` is not a file; ``"{invalid}: {reason}"`` when
            it cannot be read or is not JSON.
    """
    from arena_tao_cosmos_reason.errors import CosmosPlanError

    file = Path(path)
    if not file.is_file():
        raise CosmosPlanError(missing)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CosmosPlanError(f"{invalid}: {exc}") from None
