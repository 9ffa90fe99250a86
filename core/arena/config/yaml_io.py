"""Read and write experiment YAML.

Reading uses ``yaml.SafeLoader`` (no arbitrary objects) and refuses duplicate keys, which
YAML itself would silently resolve to the last one (a run defined twice, a key given twice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from arena.errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"key {key!r} is given twice (first at line {seen[key].line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, *, file: str | None = None) -> Any:
    """Parse YAML text.

    Raises:
        ConfigError: a syntax error or a duplicate key; the message gives line and column.
    """
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(_describe(exc), file=file) from None


def read_yaml(path: str | Path) -> Any:
    """Read and parse a YAML file.

    Raises:
        ConfigError: the file cannot be read, or its YAML is invalid (with line and column).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the experiment file: {exc.strerror or exc}", file=str(path)) from None
    return parse_yaml(text, file=str(path))


def dump_yaml(data: Any) -> str:
    """YAML text of plain data, keys in insertion order, block style."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _describe(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    detail = f"{context}: {problem}" if context and "twice" not in problem else problem
    return f"invalid YAML{where}: {detail}"
