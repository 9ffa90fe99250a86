"""Whether a checkpoint's files are whole before an evaluation loads them: ``arena watch`` asks
:func:`unreadable` of each settled candidate, so a truncated or corrupt checkpoint is listed as
failed with what is wrong, in arena's words, instead of a loader's traceback minutes later.

Formats are judged by extension and read only as far as their headers and checksums:
zip archives (NumPy's ``.npz``, ``torch.save``'s ``.pt``), ``.npy`` (NumPy's format, version
1.0/2.0 header), ``.safetensors`` (an 8-byte little-endian header length, a JSON header, the
tensors' ``data_offsets`` within the file) and ``.json``; a sharded checkpoint's index
(``model.safetensors.index.json``: tensor -> shard file) is checked shard by shard, so a
missing shard is named; any other file is left to its loader.
"""

from __future__ import annotations

import json
from pathlib import Path

#: How much of a zip archive :func:`unreadable` reads to check its members' CRCs; a larger
#: archive has only its directory (at the end of the file: gone when truncated) checked.
_ZIP_CRC_LIMIT = 256 * 2**20


def unreadable(path: Path) -> str | None:
    """What makes the checkpoint at ``path`` (a file, or a folder checked file by file, in name
    order) unreadable, as ``"<name>[/<file>]: <what is wrong>"``, or ``None`` when nothing is
    found. Looked at by extension: ``.npz`` (and a ``.pt`` / ``.pth`` / ``.ckpt`` / ``.bin`` /
    ``.zip`` that starts as a zip archive) must open as a zip archive whose members' CRCs match
    (up to 256 MiB); ``.npy``: NumPy's header, no Python objects (arena loads with
    ``allow_pickle=False``), the data its shape and dtype need; ``.safetensors``: its 8-byte
    little-endian header length, a JSON header, the tensors' byte ranges within the file;
    ``.json``: parses, and a sharded checkpoint's index (``*.index.json`` with a
    ``weight_map``) has every shard it lists present and whole. An empty checkpoint file, an empty file of those kinds in a folder, or a
    folder holding no file is unreadable too. Other files are not opened (their loader judges
    them)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            return f"{path.name}/: the folder holds no file"
        for file in files:
            what = _file_problem(file, alone=False)
            if what:
                return f"{path.name}/{file.relative_to(path).as_posix()}: {what}"
        return None
    what = _file_problem(path, alone=True)
    return f"{path.name}: {what}" if what else None


#: The extensions :func:`unreadable` looks into.
_CHECKED = (".npz", ".npy", ".safetensors", ".json", ".pt", ".pth", ".ckpt", ".bin", ".zip")


def _file_problem(path: Path, alone: bool) -> str | None:
    """Why one file of a checkpoint cannot be read (see :func:`unreadable`), or ``None``.
    ``alone``: the file is the whole checkpoint (empty, it is unreadable whatever its name; in
    a folder, an empty marker file such as ``_SUCCESS`` is fine)."""
    try:
        size = path.stat().st_size
        suffix = path.suffix.lower()
        if size == 0 and (alone or suffix in _CHECKED):
            return "the file is empty (0 bytes)"
        if size == 0:
            return None
        with open(path, "rb") as handle:
            head = handle.read(8)
        if suffix == ".npz" or (suffix in (".pt", ".pth", ".ckpt", ".bin", ".zip") and head.startswith(b"PK")):
            return _zip_problem(path, size, suffix)
        if suffix == ".npy":
            return _npy_problem(path, size)
        if suffix == ".safetensors":
            return _safetensors_problem(path, size, head)
        if suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
            if path.name.endswith(".index.json") and isinstance(data, dict) and isinstance(data.get("weight_map"), dict):
                return _index_problem(path, data["weight_map"])
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({exc.strerror or exc})" if isinstance(exc, OSError) else f"is not UTF-8 text ({exc.reason})"
    except ValueError as exc:
        return f"is not valid JSON ({exc})"
    return None


def _index_problem(index: Path, weight_map: dict) -> str | None:
    """What is wrong with the shards a sharded checkpoint's index (``model.safetensors.index.json``,
    ``pytorch_model.bin.index.json``: ``weight_map`` tensor -> shard file, relative to the
    index) lists, shard by shard in name order: a shard that is missing (named, with how many
    tensors the index puts in it), a name that leaves the index's folder, or a shard whose own
    file :func:`_file_problem` finds fault with; ``None`` when every shard is whole."""
    shards: dict[str, int] = {}
    for shard in weight_map.values():
        shards[str(shard)] = shards.get(str(shard), 0) + 1
    for shard in sorted(shards):
        file = index.parent / shard
        if Path(shard).is_absolute() or ".." in Path(shard).parts:
            return f"lists shard {shard!r}, a path outside its folder"
        if not file.is_file():
            return (f"lists shard {shard} (holding {shards[shard]} of its tensors), which is missing: "
                    f"the checkpoint is incomplete (still being copied, or a shard was lost)")
        what = _file_problem(file, alone=True)
        if what:
            return f"its shard {shard} {what}"
    return None


def _zip_problem(path: Path, size: int, suffix: str) -> str | None:
    import zipfile
    import zlib

    kind = "an .npz archive" if suffix == ".npz" else "a zip archive"
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip() if size <= _ZIP_CRC_LIMIT else None
    except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
        return f"is not a whole zip archive ({exc}): truncated or corrupt {size}-byte file, expected {kind}"
    except (RuntimeError, NotImplementedError, zipfile.LargeZipFile) as exc:  # encrypted, unknown compression
        return f"is {kind} that cannot be read ({exc})"
    if bad is not None:
        return f"member {bad} of {kind} fails its CRC check: the file is corrupt"
    return None


def _npy_problem(path: Path, size: int) -> str | None:
    import numpy as np

    with open(path, "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(handle)
        except ValueError as exc:
            return f"is not a NumPy .npy file ({exc})"
        if dtype.hasobject:
            return "holds Python objects (a pickled array), which arena does not load (allow_pickle=False)"
        need = handle.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return f"is truncated: its header needs {need} bytes, the file has {size}" if size < need else None


def _safetensors_problem(path: Path, size: int, head: bytes) -> str | None:
    if len(head) < 8:
        return f"is truncated: {size} bytes, shorter than the 8-byte safetensors header length"
    length = int.from_bytes(head, "little")
    if 8 + length > size:
        return f"is truncated: its header alone needs {8 + length} bytes, the file has {size}"
    with open(path, "rb") as handle:
        handle.seek(8)
        try:
            header = json.loads(handle.read(length).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            return f"has an unreadable safetensors header ({exc})"
    ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__" and isinstance(t, dict) and "data_offsets" in t] \
        if isinstance(header, dict) else []
    need = 8 + length + max(ends, default=0)
    return f"is truncated: its tensors need {need} bytes, the file has {size}" if size < need else None
