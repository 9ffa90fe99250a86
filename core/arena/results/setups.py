"""What makes two runs' success rates comparable: their **setup**, read from an output
directory's snapshot (``experiment.yaml``) or, where there is none, its ``manifest.json``.

Two runs agree on their setup when the environment (type, task and every field but
``workers`` and ``python``, which cannot change a result), the episode seeds and the rollout
limits agree. :mod:`arena.results.compare` refuses runs whose setups differ;
:mod:`arena.results.difference_stats` compares runs paired only when they agree.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from arena.outputs.layout import EXPERIMENT_FILE, MANIFEST_FILE, read_snapshot
from arena.outputs.records import read_json

#: Run settings (snapshot paths) that must agree for two success rates to be comparable.
#: ``environment.*`` covers the type, the task and every other environment field.
SETUP_PREFIXES = ("environment.", "rollout_limit.")
#: Environment fields that cannot change a result: how envs are spread over processes, and
#: which interpreter runs them (what of it matters, the simulator versions, is in the
#: records' protocol fingerprint, compared on its own).
NOT_SETUP_KEYS = ("environment.workers", "environment.python")


Setup = tuple[str, dict[str, Any]]


def run_setup(snapshot_run: dict[str, Any] | None, manifest_entry: dict[str, Any] | None) -> Setup | None:
    """``(source, {key path: value})`` of what makes a run comparable (see :data:`SETUP_PREFIXES`).

    From the run's section of the snapshot (source ``"experiment.yaml"``) when there is one,
    else from its manifest entry (``"manifest.json"``: task, seed, number of episodes);
    ``None`` when neither is known.
    """
    if isinstance(snapshot_run, dict):
        from arena.config.merge import leaves

        flat: dict[str, Any] = {}
        for section in ("environment", "rollout_limit"):
            value = snapshot_run.get(section)
            for path, leaf in leaves(value if isinstance(value, dict) else {}):
                key = ".".join((section, *path))
                if key not in NOT_SETUP_KEYS and not (key == "environment.perturbations" and leaf == {}):
                    flat[key] = leaf  # no perturbation is what snapshots before they existed meant
        builder = snapshot_run.get("environment_builder")
        flat["environment_builder.seed"] = builder.get("seed") if isinstance(builder, dict) else None
        return EXPERIMENT_FILE, flat
    if isinstance(manifest_entry, dict):
        return MANIFEST_FILE, {
            "environment.task": manifest_entry.get("task"),
            "environment_builder.seed": manifest_entry.get("seed"),
            "rollout_limit.num_episodes": manifest_entry.get("num_episodes"),
        }
    return None


def setup_differences(a: Setup | None, b: Setup | None) -> list[dict[str, Any]]:
    """``[{key, a, b}]`` where two runs' setups disagree.

    Settings from different sources (a snapshot against a bare manifest) are compared on the
    keys both know; an unknown setup is itself a difference (nothing can be checked).
    """
    if a is None or b is None:
        return [{"key": "settings", "a": "known" if a else "unknown (no experiment.yaml or manifest.json)",
                 "b": "known" if b else "unknown (no experiment.yaml or manifest.json)"}]
    (source_a, flat_a), (source_b, flat_b) = a, b
    keys = sorted(set(flat_a) | set(flat_b)) if source_a == source_b else sorted(set(flat_a) & set(flat_b))
    return [{"key": k, "a": flat_a.get(k), "b": flat_b.get(k)} for k in keys if flat_a.get(k) != flat_b.get(k)]


def run_setups(output_dir: str | os.PathLike[str], runs: dict[str, Any]) -> dict[str, Setup | None]:
    """Each run's setup (:func:`run_setup`) read from ``output_dir``'s snapshot or manifest."""
    return _setups(Path(output_dir), {"runs": runs})


def _setups(output_dir: Path, result: dict[str, Any]) -> dict[str, Setup | None]:
    snapshot = read_snapshot(output_dir)
    snapshot_runs = snapshot.get("runs") if isinstance(snapshot, dict) else None
    manifest = read_json(output_dir / MANIFEST_FILE)
    manifest_runs = manifest.get("runs") if isinstance(manifest, dict) else None
    return {
        name: run_setup(
            snapshot_runs.get(name) if isinstance(snapshot_runs, dict) else None,
            manifest_runs.get(name) if isinstance(manifest_runs, dict) else None,
        )
        for name in result["runs"]
    }
