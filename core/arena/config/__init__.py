"""The experiment model: section configs, loading with overrides, ``requires``, resolved runs.

Modules, one concept each:

- :mod:`~arena.config.models`      section models (environment_builder, rollout_limit, recording, trajectories, launch)
- :mod:`~arena.config.loader`      ``load_experiment`` / ``load_experiment_dict`` / ``write_snapshot`` / ``list_overrides``
- :mod:`~arena.config.resolved`    ``ResolvedRun``, ``ResolvedExperiment``
- :mod:`~arena.config.runs`        ``resolve_run``: one run from ``shared`` and its sections, in named steps
- :mod:`~arena.config.overrides`   ``KEY=VALUE`` command-line overrides
- :mod:`~arena.config.requires`    the ``requires`` check
- :mod:`~arena.config.merge`       deep merge and dotted paths on plain data
- :mod:`~arena.config.validation`  pydantic errors -> ConfigError with file, run and key path

The strict YAML reader they use (duplicate keys and alias bombs refused) is :mod:`arena.yaml_io`,
below every stage, since the output directory's snapshot is read with it too.
"""

from arena.config.loader import list_overrides, load_experiment, load_experiment_dict, write_snapshot
from arena.config.models import (
    EnvironmentBuilderConfig,
    LaunchConfig,
    RecordingConfig,
    RolloutLimitConfig,
    TrajectoriesConfig,
    WatchdogConfig,
)
from arena.config.requires import check_requires
from arena.config.resolved import ResolvedExperiment, ResolvedRun

__all__ = [
    "EnvironmentBuilderConfig",
    "LaunchConfig",
    "RecordingConfig",
    "ResolvedExperiment",
    "ResolvedRun",
    "RolloutLimitConfig",
    "TrajectoriesConfig",
    "WatchdogConfig",
    "check_requires",
    "list_overrides",
    "load_experiment",
    "load_experiment_dict",
    "write_snapshot",
]
