"""The canonical TOML emitter (spec §6.1).

Inside a table: scalars first, sorted by key, ``None`` omitted; then sub-tables sorted by key,
each under a ``[dotted.header]`` preceded by a blank line. Strings are JSON-quoted, numbers use
``repr``. The bytes depend only on the tree's content, never on insertion order, so the
checksum survives a round trip through the sealed JSON plan.
"""

from __future__ import annotations

import json
import math
import tomllib

from arena_tao_cosmos_reason.errors import CosmosPlanError


def _bare_or_quoted(key: str) -> str:
    return key if key and all(c.isalnum() or c in "-_" for c in key) else json.dumps(key)


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"TOML emitter refuses non-finite float {value!r}")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        if any(item is None for item in value):
            raise TypeError("TOML emitter refuses null inside a list")
        return "[" + ", ".join(_scalar(item) for item in value) + "]"
    if isinstance(value, dict):  # inline table inside a list is not part of our specs
        raise TypeError("TOML emitter supports tables only as dict values of tables")
    raise TypeError(f"unsupported TOML value type: {type(value).__name__}")


def dump_toml(tree: dict) -> str:
    """Canonical TOML text of ``tree`` (nested dicts of scalars and lists)."""
    lines: list[str] = []

    def emit(table: dict, path: list[str]) -> None:
        scalars = sorted((k, v) for k, v in table.items() if not isinstance(v, dict) and v is not None)
        tables = sorted((k, v) for k, v in table.items() if isinstance(v, dict))
        if path and (scalars or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_bare_or_quoted(p) for p in path) + "]")
        for key, value in scalars:
            lines.append(f"{_bare_or_quoted(key)} = {_scalar(value)}")
        for key, value in tables:
            emit(value, path + [key])

    emit(tree, [])
    return "\n".join(lines) + "\n"


def dump_and_check(tree: dict) -> str:
    """:func:`dump_toml`, parsed back with ``tomllib`` before it may be written anywhere."""
    try:
        text = dump_toml(tree)
        tomllib.loads(text)
    except (TypeError, tomllib.TOMLDecodeError) as exc:
        raise CosmosPlanError(f"generated training spec is not valid TOML: {exc}") from None
    return text
