"""The resolved experiment: every run with its classes and validated configs, nothing left to merge.

Built by :func:`arena.config.loader.load_experiment`; the plan, the launch backends and
``arena run-one`` read only these objects. :meth:`ResolvedExperiment.snapshot` is the
output directory's ``experiment.yaml``: loading it again gives an equal experiment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from arena.config.validation import validate_section
from arena.config.models import EnvironmentBuilderConfig, LaunchConfig, RecordingConfig, RolloutLimitConfig, TrajectoriesConfig
from arena.envs.base import EnvironmentConfig
from arena.errors import ConfigError
from arena.live.config import ExecutionConfig
from arena.policies.base import PolicyConfig
from arena.servertask import ServerOverrides

if TYPE_CHECKING:
    from arena.envs.workers.layout import WorkerPlan


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


@dataclass
class ResolvedRun:
    """One run: environment × policy × rollout limit, fully merged and validated.

    ``environment_type`` / ``policy_type`` are the ``type`` as written (a registered name or
    ``package.module:Class``); ``environment`` / ``policy`` are instances of the class's
    ``Config``. ``credentials`` are the names of environment variables (secrets) the run's
    runner needs besides its policy's ``api_key_env``; backends that isolate runners pass
    exactly these (and only by name). ``worker_plan``: how the envs spread over worker
    processes (:func:`arena.envs.workers.plan_workers`), planned once by the loader from the
    fields above alone, so a snapshot loaded on another machine plans the same; ``arena
    run-one`` builds the environment from it.
    """

    name: str
    environment_type: str
    environment_cls: type
    environment: EnvironmentConfig
    policy_type: str
    policy_cls: type
    policy: PolicyConfig
    environment_builder: EnvironmentBuilderConfig
    rollout_limit: RolloutLimitConfig
    server: ServerOverrides
    recording: RecordingConfig
    trajectories: TrajectoriesConfig = field(default_factory=TrajectoriesConfig)
    #: ``execution``: sync (default) or live (:mod:`arena.live`).
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)
    credentials: list[str] = field(default_factory=list)
    #: ``evaluated`` (the policy under evaluation), ``baseline`` or ``None`` (:data:`arena.config.runs.ROLES`).
    role: str | None = None
    #: Names of the variables the experiment's result sinks read (``tracking``), set by the experiment.
    tracking_secrets: list[str] = field(default_factory=list, compare=False, repr=False)
    worker_plan: WorkerPlan | None = None

    def to_dict(self) -> dict[str, Any]:
        """The run as plain YAML-able data, every field included (defaults too)."""
        return {
            "environment": {"type": self.environment_type, **_dump(self.environment)},
            "policy": {"type": self.policy_type, **_dump(self.policy)},
            "environment_builder": _dump(self.environment_builder),
            "rollout_limit": _dump(self.rollout_limit),
            "server": _dump(self.server),
            "recording": _dump(self.recording),
            "trajectories": _dump(self.trajectories),
            **({"execution": _dump(self.execution)} if self.execution.live else {}),
            "credentials": list(self.credentials),
            **({"role": self.role} if self.role else {}),
        }

    def runner_secrets(self) -> list[str]:
        """The environment variable names the runner of this run needs: its policy's
        ``api_key_env`` (when set), ``credentials`` and the result sinks' credentials
        (``tracking``), in that order, without repeats."""
        key_env = getattr(self.policy, "api_key_env", None)
        return list(dict.fromkeys([*([key_env] if key_env else []), *self.credentials, *self.tracking_secrets]))


@dataclass
class ResolvedExperiment:
    """An experiment file after overrides, merging and validation.

    ``name`` is the file's stem (``"experiment"`` for data without a file); ``runs`` keep the
    file's order. ``shared`` is the file's ``shared`` section after command-line overrides,
    kept for ``--list-overrides`` only (it is already merged into every run, is not part of
    the snapshot and does not take part in equality).
    """

    name: str
    source: str | None
    requires: dict[str, str]
    launch: LaunchConfig
    runs: dict[str, ResolvedRun]
    shared: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    #: Modules the runs' ``package.module:Class`` types imported (allowed by the user).
    imports: list[str] = field(default_factory=list)
    #: The ``tracking`` section: result sinks and their options (:mod:`arena.sinks`).
    tracking: Any = None
    #: Caveats of the configuration that do not make it wrong (an override that changes no run),
    #: printed by ``arena validate`` and ``arena run``; not part of the snapshot.
    warnings: list[str] = field(default_factory=list, compare=False, repr=False)
    #: Every run of the experiment, in order, when ``runs`` holds only those to launch (:meth:`only`);
    #: empty when ``runs`` is every run. Read it through :attr:`all_runs`.
    experiment_runs: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def all_runs(self) -> tuple[str, ...]:
        """Every run name of the experiment, also those :meth:`only` left out: what options that
        name runs (``launch.slurm.shards``, ``launch.osmo.placement``) are checked against."""
        return self.experiment_runs or tuple(self.runs)

    def only(self, names) -> ResolvedExperiment:
        """A copy whose ``runs`` are only ``names`` (runs of this experiment, kept in its order):
        what a backend launches for ``arena run --run`` or a resume (:attr:`all_runs` unchanged).

        Raises:
            ConfigError: a name that is not a run of the experiment.
        """
        chosen = set(names)
        if unknown := sorted(chosen - set(self.runs)):
            raise ConfigError(f"no run {', '.join(unknown)} (runs: {', '.join(self.runs)})", file=self.source)
        return dataclasses.replace(
            self, runs={name: run for name, run in self.runs.items() if name in chosen}, experiment_runs=self.all_runs
        )

    def __post_init__(self) -> None:
        secrets = self.tracking.secret_env_names() if self.tracking is not None else []
        for run in self.runs.values():  # every runner raises sink events: it gets their credentials' names
            run.tracking_secrets = list(secrets)

    def snapshot(self) -> dict[str, Any]:
        """The fully resolved experiment as plain data: ``name``, ``requires``, ``launch``, ``runs``,
        ``allow_imports`` (the modules it imports) when it imports any, and ``tracking`` when
        result sinks (or a step) are configured."""
        data: dict[str, Any] = {
            "name": self.name,
            "requires": dict(self.requires),
            "launch": self.launch.model_dump(mode="json", by_alias=True),
            "runs": {name: run.to_dict() for name, run in self.runs.items()},
        }
        if self.imports:
            data["allow_imports"] = list(self.imports)
        if self.tracking is not None and self.tracking.to_dict():
            data["tracking"] = self.tracking.to_dict()
        return data

    def with_policy_endpoint(
        self, run: str, host: str, port: int, *, api_key_env: str | None = None
    ) -> ResolvedExperiment:
        """A copy whose run ``run`` has its policy's ``remote_host`` / ``remote_port`` set (and
        ``api_key_env``, the NAME of the variable holding the server's key, when given).

        A policy config without those fields (a local policy) is left as it is.

        Raises:
            ConfigError: no run ``run``, or the endpoint does not validate (e.g. port 0).
        """
        if run not in self.runs:
            raise ConfigError(f"no run '{run}' (runs: {', '.join(self.runs)})", file=self.source, run=run)
        resolved = self.runs[run]
        fields = type(resolved.policy).model_fields
        if "remote_host" not in fields and "remote_port" not in fields:
            return dataclasses.replace(self, runs=dict(self.runs))
        data = resolved.policy.model_dump(by_alias=True)
        if "remote_host" in fields:
            data[_alias(fields, "remote_host")] = host
        if "remote_port" in fields:
            data[_alias(fields, "remote_port")] = port
        if api_key_env is not None and "api_key_env" in fields:
            data[_alias(fields, "api_key_env")] = api_key_env
        policy = validate_section(type(resolved.policy), data, file=self.source, run=run, key="policy")
        runs = dict(self.runs)
        runs[run] = dataclasses.replace(resolved, policy=policy)
        return dataclasses.replace(self, runs=runs)


def _alias(fields: dict[str, Any], name: str) -> str:
    return fields[name].alias or name
