"""Read and write experiment YAML.

Reading uses ``yaml.SafeLoader`` (no arbitrary objects) and refuses duplicate keys, which
YAML itself would silently resolve to the last one (a run defined twice, a key given twice).

It also refuses, before building anything, a document whose aliases would expand it beyond
:data:`MAX_EXPANDED_NODES` values, or that refers to itself: a few lines of anchors and
aliases (a "billion laughs") otherwise turn into billions of values the moment anything walks
them, and validation would hang for minutes holding gigabytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from arena.errors import ConfigError, short_repr


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
                f"key {short_repr(key)} is given twice (first at line {seen[key].line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


#: Values (scalars, mappings, sequences) a document may hold once its aliases are expanded.
#: Experiment files hold thousands; an alias bomb holds billions.
MAX_EXPANDED_NODES = 200_000


def parse_yaml(text: str, *, file: str | None = None) -> Any:
    """Parse YAML text.

    Raises:
        ConfigError: a syntax error, a duplicate key (the message gives line and column), or
            aliases that expand the document beyond :data:`MAX_EXPANDED_NODES` values or make
            it refer to itself.
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, file)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(_describe(exc), file=file) from None
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, file: str | None) -> None:
    """Refuse a node graph whose alias-expanded size exceeds the limit, or that has a cycle.

    Aliases make the graph a DAG of shared nodes; each node's expanded size is computed once
    (memoized by identity), so the check costs the number of distinct nodes, not the size of
    the expansion.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done:
            on_path.discard(key)
            total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_EXPANDED_NODES:
                mark = node.start_mark
                raise ConfigError(
                    f"the YAML expands through aliases to more than {MAX_EXPANDED_NODES:,} values (from line "
                    f"{mark.line + 1}): an alias bomb? Write the values out, or use fewer nested aliases",
                    file=file,
                )
            sizes[key] = total
            continue
        if key in on_path:
            mark = node.start_mark
            raise ConfigError(f"the YAML refers to itself through an alias (at line {mark.line + 1})", file=file)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


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
