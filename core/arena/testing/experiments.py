"""Run a tiny experiment end to end, in-process, for tests of arena and of plugins."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass
class ExperimentOutcome:
    """What a finished experiment left behind."""

    exit_code: int
    output_dir: Path
    result: dict[str, Any]

    def episodes(self, run: str) -> list[dict[str, Any]]:
        """The episode records of ``run``, ordered by episode_index."""
        from arena.results.aggregate import collect_run_records

        records = collect_run_records(self.output_dir / run)
        return sorted((r if isinstance(r, dict) else r.model_dump(by_alias=True) for r in records), key=lambda r: r["episode_index"])


def run_tiny_experiment(
    experiment: dict[str, Any] | str | Path,
    output_dir: Path,
    overrides: list[str] | tuple[str, ...] = (),
) -> ExperimentOutcome:
    """Load ``experiment`` (a dict, YAML text or a path), run it, and return its outcome.

    ``output_dir`` must not exist yet (or be empty).
    """
    from arena.config import load_experiment
    from arena.launch.submit import run_experiment

    output_dir = Path(output_dir)
    if isinstance(experiment, Path) or (isinstance(experiment, str) and "\n" not in experiment and experiment.endswith((".yaml", ".yml"))):
        path = Path(experiment)
    else:
        data = yaml.safe_load(experiment) if isinstance(experiment, str) else experiment
        path = output_dir.parent / f"{output_dir.name}-experiment.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    exp = load_experiment(path, list(overrides))
    code = run_experiment(exp, output_dir=output_dir)
    result_path = output_dir / "experiment_result.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    return ExperimentOutcome(exit_code=code, output_dir=output_dir, result=result)
