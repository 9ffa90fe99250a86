"""The experiment's own config sections, one pydantic model each.

Component sections (``environment``, ``policy``) are validated with the registered class's
``Config``; ``server`` with :class:`arena.servertask.ServerOverrides`. Every model here
forbids unknown keys.

``launch`` holds one key per launch backend with that backend's options (validated with
``backend_cls.Config`` from the registry), so :class:`LaunchConfig` needs the plugin
manager: pass it as validation context, ``LaunchConfig.model_validate(data,
context={"manager": manager})``; without one the process-wide manager is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError


class EnvironmentBuilderConfig(BaseModel):
    """How many simulator instances a run steps together, and the base episode seed."""

    model_config = ConfigDict(extra="forbid")

    num_envs: int = Field(1, ge=1, description="envs stepped together in one process (vectorized)")
    seed: int = Field(0, description="base seed; episode i resets with seed + i")


class StopWhenConfig(BaseModel):
    """``rollout_limit.stop_when``: end a run early once its success rate is known well enough.

    Decided on an anytime-valid confidence sequence (:mod:`arena.outputs.stopping`) over the
    episodes in seed order, inside ``arena run-one``; the run stops at the first rule met and
    is complete, not partial. At least one of ``half_width`` and ``threshold``.
    """

    model_config = ConfigDict(extra="forbid")

    half_width: float | None = Field(
        None, gt=0, lt=0.5, description="stop once the confidence sequence is at most ± this wide (a fraction)"
    )
    threshold: float | None = Field(
        None, gt=0, lt=1, description="stop once the confidence sequence lies wholly above or below this rate"
    )
    confidence: float = Field(0.95, gt=0.5, lt=1, description="confidence of the sequence")
    min_episodes: int = Field(1, ge=1, description="never stop before this many episodes")
    paired_with: str | None = Field(
        None, description="stop when the difference to this run excludes 0 (not supported: refused)"
    )

    @model_validator(mode="after")
    def _a_rule(self) -> "StopWhenConfig":
        if self.paired_with is not None:
            raise ValueError(
                "paired stopping (stop_when.paired_with) is not supported: the two runs execute in separate "
                "arena run-one processes, none of which sees both runs' records; stop each run on its own "
                "(half_width or threshold) and compare them afterwards with arena compare"
            )
        if self.half_width is None and self.threshold is None:
            raise ValueError("stop_when needs half_width or threshold (or both)")
        return self


class RolloutLimitConfig(BaseModel):
    """How many episodes a run executes and when an episode ends."""

    model_config = ConfigDict(extra="forbid")

    num_episodes: int = Field(10, ge=1, description="episodes (work items) of the run")
    max_episode_steps: int | None = Field(
        None, ge=1, description="steps until an episode is a timeout; null: the environment's default"
    )
    terminate_on_success: bool = Field(True, description="end an episode as soon as it succeeds")
    stop_when: StopWhenConfig | None = Field(
        None, description="end the run early (anytime-valid); null: run every episode"
    )
    detect: float | None = Field(
        None, gt=0, lt=1, description="the difference of success rates this run should resolve (validate warns when num_episodes cannot)"
    )


class RecordingConfig(BaseModel):
    """Episode videos."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="write one video per episode")
    camera: str | None = Field(None, description="camera name; null: the environment's render()")
    fps: int = Field(20, gt=0, description="frames per second of the video file")
    max_episodes: int | None = Field(None, ge=0, description="record at most this many episodes; null: all")


class TrajectoriesConfig(BaseModel):
    """Observations, actions and rewards of recorded episodes (:mod:`arena.rollout.trajectories`)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(False, description="write one .npz per recorded episode into <run>/trajectories/")
    max_episodes: int | None = Field(None, ge=0, description="record episodes with index < this; null: all")
    max_mb: float | None = Field(
        1024.0, gt=0, description="stop recording new episodes once this work directory's files reach it (MB); null: no bound"
    )
    cameras: bool | list[str] = Field(
        True, description="camera_obs frames to record: true every camera the env produces, false none, or a list of names"
    )


class WatchdogConfig(BaseModel):
    """Self-supervision of ``arena run-one``: restart a run whose progress stalls."""

    model_config = ConfigDict(extra="forbid")

    stall_s: float = Field(600.0, gt=0, description="seconds without progress before a restart")
    first_episode_grace_s: float = Field(
        1800.0, gt=0, description="seconds allowed before the first episode finishes (server start, compile)"
    )
    max_restarts: int = Field(2, ge=0, description="restarts before the run is failed")


_LAUNCH_FIELDS = ("backend", "watchdog")


class LaunchConfig(BaseModel):
    """Where and how runs execute.

    ``backend`` names a registered launch backend; every other key is a backend name whose
    value holds that backend's options (``backend_cls.Config``). An unknown backend name is
    an error listing the registered ones. :meth:`options` returns the validated options of
    one backend (its defaults if the file gives none). Dumps hold the selected backend's
    options (defaults included) and those of every other backend given; equality compares
    ``backend``, ``watchdog`` and those options.
    """

    model_config = ConfigDict(extra="forbid")

    backend: str = Field("local", description="registered launch backend that executes the runs")
    watchdog: WatchdogConfig | None = Field(None, description="null: no self-supervision")

    _options: dict[str, BaseModel] = PrivateAttr(default_factory=dict)
    #: the registry's launch backends when this config was validated (each imported when its options are read)
    _backends: Mapping[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _backend_options(
        cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        if isinstance(data, LaunchConfig) or not isinstance(data, dict):
            return handler(data)
        manager = (info.context or {}).get("manager")
        if manager is None:
            from arena.plugins import get_plugin_manager

            manager = get_plugin_manager()
        backends: Mapping[str, Any] = manager.registry.launch_backends
        known = ", ".join(sorted(backends)) or "none"

        errors: list[InitErrorDetails] = []
        model = None
        try:
            model = handler({k: v for k, v in data.items() if k in _LAUNCH_FIELDS})
        except ValidationError as exc:
            errors.extend(_line_errors(exc, ()))

        backend = data.get("backend", "local")
        if isinstance(backend, str) and backend not in backends:
            errors.append(_custom("backend", backend, f"unknown launch backend '{backend}' (registered: {known})"))

        options: dict[str, BaseModel] = {}
        for name, value in data.items():
            if name in _LAUNCH_FIELDS:
                continue
            if name not in backends:
                errors.append(
                    _custom(
                        name,
                        value,
                        f"unknown key '{name}': expected backend, watchdog or the options of a "
                        f"launch backend (registered: {known})",
                    )
                )
                continue
            config_cls = _options_class(backends[name])
            try:
                options[name] = config_cls.model_validate({} if value is None else value)
            except ValidationError as exc:
                errors.extend(_line_errors(exc, (name,), config_cls))
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)

        assert model is not None
        if backend not in options:
            config_cls = _options_class(backends[backend])
            try:
                options[backend] = config_cls()
            except ValidationError as exc:
                raise ValidationError.from_exception_data(
                    cls.__name__, _line_errors(exc, (backend,), config_cls)
                ) from None
        model._options = options
        model._backends = backends
        return model

    @model_serializer(mode="wrap")
    def _dump_options(self, handler: Any, info: Any) -> dict[str, Any]:
        data = handler(self)
        for name, options in self._options.items():
            data[name] = options.model_dump(mode=info.mode, by_alias=True)
        return data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return (self.backend, self.watchdog, self._options) == (other.backend, other.watchdog, other._options)

    __hash__ = None  # type: ignore[assignment]

    def options(self, backend_name: str | None = None) -> BaseModel:
        """The validated options of ``backend_name`` (default: ``self.backend``).

        Raises:
            KeyError: the backend was not registered when this config was validated.
        """
        name = backend_name or self.backend
        if name in self._options:
            return self._options[name]
        if name not in self._backends:
            raise KeyError(f"no options for launch backend '{name}' (registered: {', '.join(self._backends)})")
        return _options_class(self._backends[name])()


def _options_class(backend_cls: Any) -> type[BaseModel]:
    config_cls = getattr(backend_cls, "Config", None)
    if isinstance(config_cls, type) and issubclass(config_cls, BaseModel):
        return config_cls
    return _NoOptions


class _NoOptions(BaseModel):
    """Options of a backend that declares no ``Config``: none accepted."""

    model_config = ConfigDict(extra="forbid")


def _custom(key: str, value: Any, message: str) -> InitErrorDetails:
    return {
        "type": PydanticCustomError("arena_config", "{message}", {"message": message}),
        "loc": (key,),
        "input": value,
    }


def _line_errors(
    exc: ValidationError, prefix: tuple[Any, ...], model_cls: type[BaseModel] | None = None
) -> list[InitErrorDetails]:
    """Errors of ``exc`` located under ``prefix``; with ``model_cls``, already described
    against that model (a nested model's known keys are not reachable from the outer one)."""
    from arena.config.validation import describe

    out: list[InitErrorDetails] = []
    for err in exc.errors():
        detail: dict[str, Any] = {"type": err["type"], "loc": (*prefix, *err["loc"]), "input": err["input"]}
        if "ctx" in err:
            detail["ctx"] = err["ctx"]
        if model_cls is not None:
            detail["type"] = PydanticCustomError("arena_config", "{message}", {"message": describe(err, model_cls)})
            detail.pop("ctx", None)
        elif err["type"] not in _KNOWN_TYPES:
            detail["type"] = PydanticCustomError("arena_config", "{message}", {"message": err["msg"]})
            detail.pop("ctx", None)
        out.append(detail)  # type: ignore[arg-type]
    return out


def _known_error_types() -> frozenset[str]:
    try:
        from pydantic_core.core_schema import ErrorType
        from typing import get_args

        return frozenset(get_args(ErrorType))
    except Exception:  # pragma: no cover - very old pydantic-core
        return frozenset()


_KNOWN_TYPES = _known_error_types()
