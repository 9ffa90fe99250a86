"""Plain-data operations on nested mappings: deep merge, read and write a dotted path, leaves.

Inputs are never modified; every function returns new containers where it changes
something. A path is a tuple of keys, e.g. ``("policy", "open_loop_horizon")``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from arena.errors import short_repr

Path = tuple[str, ...]
_MISSING = object()


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated with ``top``: mappings merge key by key, any other value of ``top`` replaces.

    ``deep_merge(a, {}) == a``, ``deep_merge(a, a) == a`` and every leaf of ``top`` reads back
    unchanged from the result.
    """
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in base.items()}
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value) if isinstance(value, Mapping | list) else value
    return out


def get_path(data: Mapping[str, Any], path: Path, default: Any = _MISSING) -> Any:
    """The value at ``path``; ``default`` (or ``KeyError``) where a key is missing."""
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            if default is _MISSING:
                raise KeyError(".".join(path))
            return default
        node = node[key]
    return node


def has_path(data: Mapping[str, Any], path: Path) -> bool:
    """Whether every key of ``path`` exists."""
    try:
        get_path(data, path)
    except KeyError:
        return False
    return True


def set_path(data: Mapping[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of ``data`` with ``path`` set to ``value``, creating mappings on the way.

    A ``None`` on the way counts as an empty mapping.

    Raises:
        TypeError: a key on the way holds a value that is not a mapping (the message names
            the dotted path up to it).
    """
    if not path:
        raise ValueError("empty path")
    out = dict(data)
    node = out
    for depth, key in enumerate(path[:-1]):
        child = node.get(key)
        if child is None:
            child = {}
        if not isinstance(child, Mapping):
            where = ".".join(path[: depth + 1])
            raise TypeError(f"'{where}' holds {type(child).__name__} {short_repr(child)}, not a mapping")
        child = dict(child)
        node[key] = child
        node = child
    node[path[-1]] = value
    return out


def leaves(data: Mapping[str, Any], prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every ``(path, value)`` whose value is not a non-empty mapping, in insertion order."""
    for key, value in data.items():
        path = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from leaves(value, path)
        else:
            yield path, value
