"""Command-line overrides ``KEY=VALUE`` of an experiment.

``KEY`` is a dotted path starting with ``shared.``, ``runs.<name>.``, ``launch.``, ``tracking.`` or
``perturbations.`` (the perturbation sweep, :mod:`arena.config.sweep`), e.g.
``shared.rollout_limit.num_episodes=5``, ``runs.pick_place.policy.open_loop_horizon=4``,
``launch.backend=slurm``, ``launch.slurm.partition=gpu``, ``perturbations.factors.image_noise=[10,40]``. ``VALUE`` is parsed as YAML
(``yaml.safe_load``): ``5`` is an int, ``true`` a bool, ``[1, 2]`` a list, ``null`` is
``None``, ``'5'`` the string ``"5"``; an empty value is the empty string. Overrides set one
path each (creating mappings on the way) and cannot add runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from arena.config.merge import Path, deep_merge, get_path, set_path
from arena.errors import ConfigError

Scope = Literal["shared", "runs", "launch", "tracking", "perturbations"]

_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
_SCOPES: tuple[Scope, ...] = ("shared", "runs", "launch", "tracking", "perturbations")
_FORM = "expected KEY=VALUE with KEY starting 'shared.', 'runs.<name>.', 'launch.', 'tracking.' or 'perturbations.'"


@dataclass(frozen=True)
class Override:
    """One parsed ``KEY=VALUE`` token; ``path`` is relative to its scope (and run)."""

    token: str
    scope: Scope
    path: Path
    value: Any
    run: str | None = None


def parse_override(token: str, *, file: str | None = None) -> Override:
    """Parse one ``KEY=VALUE`` token.

    Raises:
        ConfigError: no ``=``, an empty or malformed key segment, an unknown prefix, a path
            that stops at the prefix, or a value that is not valid YAML; the message quotes
            the token.
    """
    key, sep, raw_value = token.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"malformed override '{token}': {_FORM}", file=file)
    segments = key.split(".")
    bad = [s for s in segments if not _SEGMENT.match(s)]
    if bad:
        raise ConfigError(
            f"malformed override '{token}': key segment {bad[0]!r} must be letters, digits, '_' or '-'; {_FORM}",
            file=file,
        )
    scope = segments[0]
    if scope not in _SCOPES:
        raise ConfigError(f"override '{token}' has unknown prefix '{scope}': {_FORM}", file=file)
    run = None
    path = tuple(segments[1:])
    if scope == "runs":
        if len(path) < 2:
            raise ConfigError(f"malformed override '{token}': expected runs.<name>.<key>=VALUE", file=file)
        run, path = path[0], path[1:]
    elif not path:
        raise ConfigError(f"malformed override '{token}': expected {scope}.<key>=VALUE", file=file)
    return Override(token=token, scope=scope, path=path, value=parse_value(raw_value, token=token, file=file), run=run)  # type: ignore[arg-type]


def parse_value(text: str, *, token: str | None = None, file: str | None = None) -> Any:
    """Parse an override value as YAML; the empty string stays the empty string.

    Raises:
        ConfigError: the text is not valid YAML.
    """
    if text.strip() == "":
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"override '{token or text}': value is not valid YAML ({problem})", file=file) from None


def apply_overrides(data: Mapping[str, Any] | None, overrides: Iterable[Override], *, file: str | None = None) -> dict[str, Any]:
    """``data`` with each override's ``path`` set to its value, in order. A mapping value
    merges into a mapping already there (``shared.rollout_limit={num_episodes: 3}`` keeps
    ``max_episode_steps``), like the file's own sections merge; set a key to ``null`` to
    clear it.

    Raises:
        ConfigError: an override descends into a value that is not a mapping.
    """
    out = dict(data or {})
    for override in overrides:
        try:
            value = override.value
            current = get_path(out, override.path, None)
            if isinstance(value, Mapping) and isinstance(current, Mapping):
                value = deep_merge(current, value)
            out = set_path(out, override.path, value)
        except TypeError as exc:
            raise ConfigError(f"override '{override.token}' cannot be applied: {exc}", file=file, run=override.run) from None
    return out
