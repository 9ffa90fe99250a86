"""Read a W&B offline run back (``wandb/offline-run-*/run-*.wandb``), without a network.

wandb writes every run, online or offline, as a transaction log of protobuf ``Record``s
(``wandb.proto.wandb_internal_pb2.Record``; what ``wandb sync`` uploads later). The file is a
7-byte header (``b":W&B"``, magic ``0xBEE1`` little-endian, version byte) followed by the
LevelDB log format: 32 KiB blocks, each record a 7-byte header (CRC-32C, ``uint16`` length,
type: 1 full, 2 first, 3 middle, 4 last) and its payload; a block's tail shorter than a
header is zero padding (https://github.com/google/leveldb/blob/main/doc/log_format.md;
wandb's ``core/pkg/leveldb``). Checksums are not verified here.

:func:`read_offline_run` folds the records into what the W&B UI would show: config, summary,
history rows, artifacts logged and files saved.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = b":W&B"
_BLOCK = 32 * 1024
_RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """A W&B run as its ``.wandb`` file holds it."""

    run_id: str = ""
    project: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)  # {"name", "type", "files": [paths]}
    finished: bool = False
    exit_code: int | None = None


def iter_records(path: str | os.PathLike[str]):
    """Yield the raw payloads (``bytes``) of a ``.wandb`` file, in order.

    Raises:
        ValueError: the file does not start with the W&B header.
    """
    data = Path(path).read_bytes()
    if data[:4] != _HEADER:
        raise ValueError(f"{path} is not a W&B transaction log (no {_HEADER!r} header)")
    pos, pending = 7, b""
    while pos + _RECORD_HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _RECORD_HEADER:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _RECORD_HEADER])
        if kind == 0 and length == 0:  # zero padding to the end of the block
            pos += left
            continue
        payload = data[pos + _RECORD_HEADER : pos + _RECORD_HEADER + length]
        pos += _RECORD_HEADER + length
        if kind == FULL:
            yield payload
        elif kind == FIRST:
            pending = payload
        elif kind == MIDDLE:
            pending += payload
        elif kind == LAST:
            yield pending + payload
            pending = b""


def _set(target: dict[str, Any], item: Any) -> None:
    keys = list(item.nested_key) or [item.key]
    value = json.loads(item.value_json)
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    target[keys[-1]] = value


def read_offline_run(run_dir: str | os.PathLike[str]) -> OfflineRun:
    """Fold the ``run-*.wandb`` file of ``run_dir`` (an ``offline-run-*`` folder) into an
    :class:`OfflineRun`.

    Raises:
        FileNotFoundError: ``run_dir`` holds no ``.wandb`` file.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    files = sorted(Path(run_dir).glob("*.wandb"))
    if not files:
        raise FileNotFoundError(f"no .wandb file in {run_dir}")
    out = OfflineRun()
    for payload in iter_records(files[0]):
        record = pb.Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            out.run_id, out.project, out.name = run.run_id, run.project, run.display_name
            out.group, out.job_type, out.tags = run.run_group, run.job_type, list(run.tags)
            for item in run.config.update:
                _set(out.config, item)
        elif kind == "config":
            for item in record.config.update:
                _set(out.config, item)
        elif kind == "summary":
            for item in record.summary.update:
                _set(out.summary, item)
        elif kind == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                _set(row, item)
            out.history.append(row)
        elif kind == "artifact":
            art = record.artifact
            out.artifacts.append(
                {"name": art.name, "type": art.type, "files": [entry.path for entry in art.manifest.contents]}
            )
        elif kind == "exit":
            out.finished, out.exit_code = True, record.exit.exit_code
    return out


def offline_runs(wandb_dir: str | os.PathLike[str]) -> list[OfflineRun]:
    """Every offline run under ``wandb_dir`` (the ``wandb/`` folder W&B writes), oldest first."""
    return [read_offline_run(d) for d in sorted(Path(wandb_dir).glob("offline-run-*"))]


def wait_for_runs(wandb_dir: str | os.PathLike[str], count: int, timeout_s: float = 60.0) -> list[OfflineRun]:
    """:func:`offline_runs` once ``count`` runs are there and finished (their exit record
    written), polling: wandb's service process writes the file after ``run.finish()``
    returns (about a second later, in 0.31). Returns what is there at ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        runs = offline_runs(wandb_dir)
        if (len(runs) >= count and all(r.finished for r in runs)) or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)
