"""Validate a section with its pydantic model and turn pydantic errors into ConfigError.

A pydantic error location becomes a dotted key under the section (``policy.open_loop_horizon``);
the message says what is expected: the known keys for an unknown key, the type and
description of a missing field, the constraint and the value given otherwise.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from arena.errors import ConfigError, short_repr

Origin = Callable[[tuple[str, ...]], str]


def validate_section(
    model_cls: type[BaseModel],
    data: Any,
    *,
    file: str | None,
    run: str | None,
    key: str | None,
    context: dict[str, Any] | None = None,
    origin: Origin | None = None,
) -> BaseModel:
    """``model_cls.model_validate(data)``, with errors located at ``file``, ``run``, ``key``.

    ``origin(path)`` may return a note appended to an error's message (e.g. " (set in shared)").

    Raises:
        ConfigError: the data does not validate; the key of the first error is its ``key``, the
            others are listed in the message.
    """
    try:
        return model_cls.model_validate({} if data is None else data, context=context)
    except ValidationError as exc:
        raise config_error(exc, model_cls, file=file, run=run, key=key, origin=origin) from None


def config_error(
    exc: ValidationError,
    model_cls: type[BaseModel] | None,
    *,
    file: str | None,
    run: str | None,
    key: str | None,
    origin: Origin | None = None,
) -> ConfigError:
    """One ConfigError describing every error of ``exc``."""
    described = []
    for err in exc.errors():
        loc = tuple(str(part) for part in err["loc"])
        path = ((key,) if key else ()) + loc
        message = describe(err, model_cls)
        if origin is not None:
            message += origin(path)
        described.append((".".join(path) or None, message))
    first_key, first_message = described[0]
    if len(described) > 1:
        rest = "; ".join(f"key {k}: {m}" if k else m for k, m in described[1:])
        first_message = f"{first_message} (and {len(described) - 1} more: {rest})"
    return ConfigError(first_message, file=file, run=run, key=first_key)


def describe(err: Any, model_cls: type[BaseModel] | None) -> str:
    """A one-line message for one pydantic error dict, saying what is expected."""
    kind = err["type"]
    loc = tuple(err["loc"])
    name = str(loc[-1]) if loc else ""
    if kind == "extra_forbidden":
        owner = _model_at(model_cls, loc[:-1])
        known = ", ".join(owner.model_fields) if owner is not None else ""
        return f"unknown key '{name}'" + (f"; expected one of: {known}" if known else "")
    if kind == "missing":
        owner = _model_at(model_cls, loc[:-1])
        field = owner.model_fields.get(name) if owner is not None else None
        if field is not None:
            hint = _type_name(field.annotation)
            if field.description:
                hint += f": {field.description}"
            return f"missing required field '{name}' ({hint})"
        return f"missing required field '{name}'"
    message = err["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if message.startswith("Assertion failed, "):
        message = message[len("Assertion failed, ") :]
    if kind not in ("arena_config",):
        message += f"; got {_short(err.get('input'))}"
    return message


def _short(value: Any, limit: int = 80) -> str:
    return short_repr(value, limit)  # never the repr of a whole (possibly huge) value


def _model_at(model_cls: type[BaseModel] | None, loc: tuple[Any, ...]) -> type[BaseModel] | None:
    current: Any = model_cls
    for part in loc:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _first_model(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _first_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: Any) -> str:
    if annotation is None:
        return "any"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    return str(annotation).replace("typing.", "")
