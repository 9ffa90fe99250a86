"""Annotation files by structure: envelope, family detection and record rules (spec §4.1-4.4).

No branch here looks at a project, benchmark, folder or file name: only at JSON structure.
"""

from __future__ import annotations

from pathlib import Path

from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import read_json_file, stable_hash

CONVERSATION = "video_conversation"
TASK_AWARE = "task_aware_video_reasoning"
FAMILIES = (CONVERSATION, TASK_AWARE)
MEDIA_FIELDS = ("video", "video_id", "image", "image_id", "media", "media_path")
CANONICAL_TASK_MEDIA = ("video_id", "image_id")
TASK_AWARE_FORMAT = "tao-vl-reason-v1.0"


def load_annotation(path: str) -> tuple[list[dict], dict]:
    """Read one annotation file; return ``(records, file_metadata)``.

    Accepts a JSON array of objects or ``{items: [...], metadata?: {...}}``.
    """
    data = read_json_file(
        Path(path).expanduser(), f"annotation path is inaccessible: {path}", f"cannot read annotation {path}"
    )
    metadata: dict = {}
    if isinstance(data, list):
        items = data
    elif isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
        metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    else:
        raise CosmosPlanError(f"{path}: annotation must be a JSON array or an object containing an items array")
    if not items:
        raise CosmosPlanError(f"{path}: annotation contains zero records")
    if any(not isinstance(item, dict) for item in items):
        raise CosmosPlanError(f"{path}: annotation contains a non-object record")
    return items, metadata


def normalize_task(name: str) -> str:
    """Case-fold; ``-`` and spaces become ``_``."""
    return str(name).strip().casefold().replace("-", "_").replace(" ", "_")


def record_task(record: dict, metadata: dict) -> str | None:
    """The normalized task of a record: ``task``, else ``task_type``, else file ``metadata.task``."""
    for value in (record.get("task"), record.get("task_type"), metadata.get("task")):
        if isinstance(value, str) and value.strip():
            return normalize_task(value)
    return None


def detect_family(records: list[dict], metadata: dict) -> str:
    """``task_aware_video_reasoning`` or ``video_conversation`` by structure (spec §4.2)."""
    if metadata.get("task") or metadata.get("tasks"):
        return TASK_AWARE
    if any(r.get("task") or r.get("task_type") for r in records):
        return TASK_AWARE
    if all(isinstance(r.get("conversations"), list) or isinstance(r.get("messages"), list) for r in records):
        return CONVERSATION
    raise CosmosPlanError("cannot infer dataset family from annotations; specify a supported structural family")


def turns(record: dict) -> list | None:
    """The conversation list (``conversations`` or ``messages``), or ``None``."""
    for key in ("conversations", "messages"):
        if isinstance(record.get(key), list):
            return record[key]
    return None


def media_values(record: dict, fields: tuple[str, ...] = MEDIA_FIELDS) -> list[str]:
    """Media references of a record, from the first present field in ``fields`` order."""
    for key in fields:
        value = record.get(key)
        if isinstance(value, str) and value:
            return [value]
        if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
            return list(value)
    return []


def answer_target(record: dict) -> str | None:
    """The supervision target: the final turn's ``value``/``content`` string (trimmed), else a
    task-aware ``answer``; a typed-parts ``content`` list yields no target.
    """
    conversation = turns(record)
    if conversation:
        last = conversation[-1]
        if isinstance(last, dict):
            text = last.get("value", last.get("content"))
            if isinstance(text, str) and text.strip():
                return text.strip()
        return None
    answer = record.get("answer")
    return answer.strip() if isinstance(answer, str) and answer.strip() else None


def record_key(record: dict, media: list[str]) -> str:
    """Logical record identity (spec §4.8); includes ``messages`` (our fix of the [C] quirk)."""
    identity = record.get("id") or record.get("sample_id") or record.get("video_id")
    return stable_hash(
        {
            "id": identity,
            "media": media,
            "question": record.get("question"),
            "conversations": record.get("conversations"),
            "messages": record.get("messages"),
        }
    )


def record_errors(record: dict, family: str, where: str) -> list[str]:
    """Schema errors of one record for ``family``; empty when valid."""
    errors = []
    conversation = turns(record)
    if family == CONVERSATION:
        if conversation is None or len(conversation) < 2:
            errors.append(f"{where}: conversation record needs >=2 turns")
        if not media_values(record):
            errors.append(f"{where}: record has no media field (one of {', '.join(MEDIA_FIELDS)})")
        return errors
    present = [key for key in MEDIA_FIELDS if record.get(key) not in (None, "", [])]
    canonical = [key for key in present if key in CANONICAL_TASK_MEDIA and isinstance(record.get(key), str)]
    if len(present) != 1 or len(canonical) != 1:
        errors.append(f"{where}: task-aware record requires exactly one canonical video_id or image_id; found {present}")
    has_turns = conversation is not None and len(conversation) >= 2
    has_qa = all(isinstance(record.get(k), str) and record[k].strip() for k in ("question", "answer"))
    if not (has_turns or has_qa):
        errors.append(f"{where}: task-aware record needs either >=2 conversation turns or non-empty question/answer")
    return errors
