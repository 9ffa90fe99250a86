"""One run of an experiment: from ``shared`` and the run's own sections to a :class:`ResolvedRun`.

:func:`resolve_run` is a sequence of named steps, each raising :class:`arena.errors.ConfigError`
with the file, the run and the key:

1. :func:`check_run_keys`: the run's keys are run keys, each section a mapping;
2. :func:`merge_sections`: ``shared`` under the run's own values, section by section (a section
   whose ``type`` differs from ``shared``'s drops ``shared``'s fields);
3. :class:`Origin`: where a value came from (an override, ``shared``), for the messages;
4. :func:`resolve_component`: the environment's and the policy's type resolved (registered, or
   ``package.module:Class`` with the user's opt-in, :mod:`arena.config.imports`), checked and
   their config validated;
5. :func:`validate_sections`: ``environment_builder``, ``rollout_limit``, ``server``, ``recording``,
   ``trajectories``, ``execution``;
6. :func:`check_run`: the run as a whole (how its envs spread over worker processes, live
   execution against the environment's hold rules and control rate, the configs'
   ``validate_run`` hooks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from arena.config.imports import ImportCheck, ImportPolicy
from arena.config.merge import deep_merge, has_path
from arena.config.models import EnvironmentBuilderConfig, RecordingConfig, RolloutLimitConfig, TrajectoriesConfig
from arena.config.overrides import Override
from arena.config.resolved import ResolvedRun
from arena.config.validation import validate_section
from arena.envs.base import Environment, declared_success_key
from arena.live.config import ExecutionConfig
from arena.envs.workers.layout import plan_workers
from arena.errors import ConfigError, PluginError, SuccessSignalError, short_repr
from arena.policies.base import PolicyBase
from arena.servertask import ENV_NAME, ServerOverrides

if TYPE_CHECKING:
    from arena.plugins import PluginManager

RUN_KEYS = (
    "environment", "policy", "environment_builder", "rollout_limit", "server", "recording", "trajectories", "execution",
    "credentials", "role",
)
#: Run keys whose value is a list, not a mapping of fields.
LIST_RUN_KEYS = ("credentials",)
#: Run keys whose value is one string.
SCALAR_RUN_KEYS = ("role",)
#: The values of a run's ``role``: ``evaluated`` marks the policy under evaluation (the run
#: whose rate ``arena.evaluate()`` returns as the headline, and that trackers plot), ``baseline``
#: a reference it is compared with.
ROLES = ("evaluated", "baseline")

COMPONENTS: dict[str, tuple[str, str, type]] = {
    # section: (registry kind, what it is called, required base class)
    "environment": ("environments", "environment", Environment),
    "policy": ("policies", "policy", PolicyBase),
}
SECTIONS: dict[str, type[BaseModel]] = {
    "environment_builder": EnvironmentBuilderConfig,
    "rollout_limit": RolloutLimitConfig,
    "server": ServerOverrides,
    "recording": RecordingConfig,
    "trajectories": TrajectoriesConfig,
    "execution": ExecutionConfig,
}


def resolve_run(
    name: str,
    shared: Mapping[str, Any],
    own: Mapping[str, Any],
    *,
    source: str | None,
    manager: PluginManager,
    overrides: Sequence[Override] = (),
    imports: ImportCheck | None = None,
) -> ResolvedRun:
    """Run ``name`` resolved from ``shared`` and its ``own`` sections (overrides applied to
    both already; ``overrides`` only say where a value came from).

    Raises:
        ConfigError: any step refused the run (file, run and key named).
    """
    check_run_keys(own, source=source, run=name, prefix=None)
    merged = merge_sections(shared, own)
    origin = Origin(shared, own, overrides)
    imports = imports or ImportCheck(ImportPolicy.gather(), [], False)
    components = {
        section: resolve_component(section, merged[section], name, source=source, manager=manager, imports=imports, origin=origin)
        for section in COMPONENTS
    }
    sections = validate_sections(merged, name, source=source, origin=origin)
    env_type, env_cls, env_config = components["environment"]
    policy_type, policy_cls, policy_config = components["policy"]
    run = ResolvedRun(
        name=name,
        environment_type=env_type,
        environment_cls=env_cls,
        environment=env_config,  # type: ignore[arg-type]
        policy_type=policy_type,
        policy_cls=policy_cls,
        policy=policy_config,  # type: ignore[arg-type]
        **sections,  # type: ignore[arg-type]
        # a run's own list replaces shared's, as every value does
        credentials=list(dict.fromkeys(own.get("credentials") or shared.get("credentials") or [])),
        role=own.get("role", shared.get("role")),
    )
    check_run(run, source=source)
    return run


def check_run_keys(data: Mapping[str, Any], *, source: str | None, run: str | None, prefix: str | None) -> None:
    """Every key of ``data`` is a run key (:data:`RUN_KEYS`) and each section a mapping
    (``credentials``: a list of variable names)."""
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in RUN_KEYS:
            raise ConfigError(
                f"unknown key '{key}'; expected one of the run keys: {', '.join(RUN_KEYS)}",
                file=source,
                run=run,
                key=path,
            )
        if key in LIST_RUN_KEYS:
            _check_credentials(value, source=source, run=run, key=path)
        elif key in SCALAR_RUN_KEYS:
            if value is not None and value not in ROLES:
                raise ConfigError(f"expected one of {', '.join(ROLES)} (or null); got {short_repr(value)}", file=source, run=run, key=path)
        elif value is not None and not isinstance(value, Mapping):
            raise ConfigError(
                f"expected a mapping of {key} fields; got {type(value).__name__} {short_repr(value)}",
                file=source,
                run=run,
                key=path,
            )


def _check_credentials(value: Any, *, source: str | None, run: str | None, key: str) -> None:
    """``credentials``: a list of environment variable NAMES (never values) the runner needs."""
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) and ENV_NAME.fullmatch(v) for v in value):
        raise ConfigError(
            f"expected a list of environment variable names (e.g. [HF_TOKEN]) the run's runner needs; got {short_repr(value)}",
            file=source,
            run=run,
            key=key,
        )


def merge_sections(shared: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each mapping section: ``shared``'s merged under the run's own (a different ``type``
    in a component section drops ``shared``'s fields of it)."""
    merged: dict[str, dict[str, Any]] = {}
    for section in RUN_KEYS:
        if section in LIST_RUN_KEYS or section in SCALAR_RUN_KEYS:
            continue
        base = dict(shared.get(section) or {})
        top = dict(own.get(section) or {})
        if section in COMPONENTS and "type" in base and "type" in top and base["type"] != top["type"]:
            base = {}  # another type: shared's fields of this section do not apply
        merged[section] = deep_merge(base, top)
    return merged


class Origin:
    """Where the value at a key path came from, when not from the run's own section:
    ``" (from override 'TOKEN')"``, ``" (value from shared)"`` or ``""``."""

    def __init__(self, shared: Mapping[str, Any], own: Mapping[str, Any], overrides: Sequence[Override]) -> None:
        self.shared, self.own, self.overrides = shared, own, overrides

    def _overridden(self, scope: str, path: tuple[str, ...]) -> Override | None:
        hits = [o for o in self.overrides if o.scope == scope and path[: len(o.path)] == o.path]
        return hits[-1] if hits else None

    def __call__(self, path: tuple[str, ...]) -> str:
        if (hit := self._overridden("runs", path)) is not None:
            return f" (from override '{hit.token}')"
        if has_path(self.own, path):
            return ""
        if (hit := self._overridden("shared", path)) is not None:
            return f" (from override '{hit.token}')"
        if has_path(self.shared, path):
            return " (value from shared)"
        return ""


def resolve_component(
    section: str,
    merged: Mapping[str, Any],
    name: str,
    *,
    source: str | None,
    manager: PluginManager,
    imports: ImportCheck,
    origin: Origin,
) -> tuple[str, type, BaseModel]:
    """``(type name, class, validated config)`` of the ``environment`` or ``policy`` section."""
    kind, label, base_cls = COMPONENTS[section]
    fields = dict(merged)
    type_name = fields.pop("type", None)
    if type_name is None:
        known = ", ".join(sorted(getattr(manager.registry, kind))) or "none"
        raise ConfigError(
            f"missing '{section}.type': a registered {label} name (registered: {known}) or package.module:Class",
            file=source,
            run=name,
            key=f"{section}.type",
        )
    if not isinstance(type_name, str):
        raise ConfigError(
            f"expected a {label} name or package.module:Class; got {type(type_name).__name__} {short_repr(type_name)}",
            file=source,
            run=name,
            key=f"{section}.type",
        )
    try:
        importing = imports.check(type_name, getattr(manager.registry, kind), label)
    except ValueError as exc:
        raise ConfigError(f"{exc}{origin((section, 'type'))}", file=source, run=name, key=f"{section}.type") from None
    try:
        cls = manager.resolve_class(kind, type_name, allow_import=importing)
    except PluginError as exc:
        raise ConfigError(f"{exc}{origin((section, 'type'))}", file=source, run=name, key=f"{section}.type") from None
    config_cls = getattr(cls, "Config", None)
    if not (isinstance(cls, type) and issubclass(cls, base_cls)) or not (
        isinstance(config_cls, type) and issubclass(config_cls, BaseModel)
    ):
        raise ConfigError(
            f"'{type_name}' is not a {base_cls.__name__} subclass with a pydantic Config",
            file=source,
            run=name,
            key=f"{section}.type",
        )
    if section == "environment":
        try:
            declared_success_key(cls)
        except SuccessSignalError as exc:
            raise ConfigError(str(exc), file=source, run=name, key="environment.type") from None
    config = validate_section(config_cls, fields, file=source, run=name, key=section, origin=origin)
    references = config.code_references() if section == "environment" else {}
    for field, reference in references.items():  # code the config names, imported at build time
        try:
            imports.check(reference, {}, f"{section}.{field} reference")
        except ValueError as exc:
            raise ConfigError(f"{exc}{origin((section, field))}", file=source, run=name, key=f"{section}.{field}") from None
    return type_name, cls, config


def validate_sections(
    merged: Mapping[str, Mapping[str, Any]], name: str, *, source: str | None, origin: Origin
) -> dict[str, BaseModel]:
    """The run's other sections (:data:`SECTIONS`), validated."""
    return {
        section: validate_section(model, dict(merged[section]), file=source, run=name, key=section, origin=origin)
        for section, model in SECTIONS.items()
    }


def check_run(run: ResolvedRun, *, source: str | None) -> None:
    """The run as a whole: how its envs spread over worker processes (``environment.workers``
    / ``python``), its ``environment.perturbations`` (:func:`arena.envs.perturbations.check_values`),
    then the environment's and the policy's ``validate_run(run)`` hooks."""
    try:  # planned once, here; the run uses this plan (ResolvedRun.worker_plan)
        run.worker_plan = plan_workers(run.environment_cls, run.environment, run.environment_builder.num_envs)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(str(exc), file=source, run=run.name, key="environment.workers") from None
    rows = getattr(run.policy, "live_chunk_rows", None)
    for key, message in run.execution.check(run.environment_cls, run.environment, rows() if callable(rows) else None):
        raise ConfigError(message, file=source, run=run.name, key=f"execution.{key}")
    from arena.envs.perturbations import PerturbationError, check_values

    try:  # every name supported by this environment, every value in its range
        check_values(run.environment_cls, run.environment, run.environment.perturbations)
    except PerturbationError as exc:
        raise ConfigError(str(exc), file=source, run=run.name, key=f"environment.perturbations.{exc.name}") from None
    for section in ("environment", "policy"):
        hook = getattr(getattr(run, section), "validate_run", None)
        if callable(hook):
            try:
                hook(run)
            except ValueError as exc:
                raise ConfigError(str(exc), file=source, run=run.name, key=section) from None
