"""The experiment's ``tracking`` section: which result sinks (:mod:`arena.sinks`) receive its
events, each with its validated options, the checkpoint's training ``step``, the evaluation's
``label`` (what names it in a tracker beside the experiment and run: a checkpoint's name) and
the ``series`` it belongs to (one id for every evaluation of one training run: trackers draw
them as one curve against ``step``; ``arena watch`` sets all three).

Validated here, with the rest of the experiment, so a wrong sink name or option is a
configuration error naming the file and the key; the sinks themselves run in
:mod:`arena.sinks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.errors import ConfigError

#: Reserved keys of the ``tracking`` section (every other key names a sink).
TRACKING_FIELDS = ("step", "label", "series")


class SinkConfig(BaseModel):
    """Options every sink has; a sink's ``Config`` subclasses this."""

    model_config = ConfigDict(extra="forbid")

    timeout_s: float = Field(60.0, gt=0, description="seconds a sink may take to finish when its process ends")

    def secret_env_names(self) -> list[str]:
        """Names of environment variables holding this sink's credentials (never their values):
        every field whose name ends in ``_env`` and holds a string."""
        return [v for k, v in self.model_dump().items() if k.endswith("_env") and isinstance(v, str) and v]


@dataclass
class ConfiguredSink:
    """One entry of ``tracking``: its ``type`` (a registered name, or ``package.module:Class``),
    the class, and the validated options."""

    type: str
    cls: type
    config: SinkConfig


@dataclass
class TrackingConfig:
    """The ``tracking`` section, validated: ``sinks`` maps each entry's name to its sink."""

    sinks: dict[str, ConfiguredSink] = field(default_factory=dict)
    step: int | None = None
    label: str | None = None
    series: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name, sink in self.sinks.items():
            data[name] = ({"type": sink.type} if sink.type != name else {}) | sink.config.model_dump(mode="json")
        for key in TRACKING_FIELDS:
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    def secret_env_names(self) -> list[str]:
        return list(dict.fromkeys(n for sink in self.sinks.values() for n in sink.config.secret_env_names()))


def parse_tracking(raw: Any, *, manager: Any, source: str | None, imports: Any = None) -> TrackingConfig:
    """Validate the ``tracking`` section against the registered sinks.

    Each key but ``step`` names a sink; its type is the key itself, or the entry's ``type``
    (a registered name or ``package.module:Class``, imported only when ``imports`` allows it:
    the loader's import opt-in, :mod:`arena.config.imports`).

    Raises:
        ConfigError: not a mapping, an unknown sink type (the message lists the registered
            ones), a bad ``step``, or options the sink's ``Config`` refuses (naming the key).
    """
    from arena.config.validation import validate_section
    from arena.errors import PluginError

    if raw is None:
        return TrackingConfig()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"tracking must be a mapping of sink names to options, got {type(raw).__name__}", file=source, key="tracking")
    known = manager.registry.result_sinks
    step = raw.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise ConfigError(f"tracking.step must be an integer (the checkpoint's training step), got {step!r}", file=source, key="tracking.step")
    names = {}
    for key in ("label", "series"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, (str, int)) or isinstance(value, bool) or not str(value).strip()
                                  or len(str(value)) > 200 or any(ord(c) < 32 for c in str(value))):
            raise ConfigError(f"tracking.{key} must be a short name (one line, at most 200 characters), got {value!r}",
                              file=source, key=f"tracking.{key}")
        names[key] = None if value is None else str(value)
    out: dict[str, ConfiguredSink] = {}
    for name, value in raw.items():
        if name in TRACKING_FIELDS:
            continue
        options = dict(value or {}) if isinstance(value, Mapping) or value is None else value
        if not isinstance(options, dict):
            raise ConfigError(f"tracking.{name} must be a mapping of the sink's options", file=source, key=f"tracking.{name}")
        type_name = str(options.pop("type", name))
        if type_name not in known and ":" not in type_name:
            names = ", ".join(sorted(known)) or "none; install e.g. arena-plugin-wandb or arena-plugin-mlflow"
            raise ConfigError(f"unknown result sink '{type_name}' (registered: {names})", file=source, key=f"tracking.{name}")
        try:
            allow = imports.check(type_name, known, "result sink") if imports is not None else False
            cls = manager.resolve_class("result_sinks", type_name, allow_import=allow)
        except (ValueError, PluginError) as exc:
            raise ConfigError(str(exc), file=source, key=f"tracking.{name}.type") from None
        config_cls = getattr(cls, "Config", SinkConfig)
        config = validate_section(config_cls, options, file=source, run=None, key=f"tracking.{name}")
        out[name] = ConfiguredSink(type_name, cls, config)
    return TrackingConfig(sinks=out, step=step, **names)
