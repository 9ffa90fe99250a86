"""The experiment a watch evaluates a checkpoint with, as a fingerprint: so a curve never joins
points of two different experiments.

``arena watch`` resolves the experiment (with the checkpoint's overrides) before each
evaluation and keeps of every run what can change a success rate: the ``environment`` (all
but ``workers``, ``python`` and ``worker_timeout_s``: where the envs run, not what they are),
the episode seed (``environment_builder.seed``), the ``rollout_limit``, the ``policy`` and what
the policy ``server`` serves (not where it binds, its GPUs or its timeouts). The values an
override with ``{checkpoint}`` / ``{step}`` sets are left out: they change with every checkpoint
by design. The result, :func:`experiment_setup`, is flat (``{"runs.toy.environment.task":
...}``, the keys written as overrides); its :func:`setup_fingerprint` is recorded with each
point in ``watch.json``, and a point whose fingerprint differs starts a new series, whose
changes (:func:`setup_changes`) the watch prints and lists.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Run sections that make up a setup, and the fields of each that cannot change a result.
_SECTIONS = {
    "environment": ("workers", "python", "worker_timeout_s"),
    "environment_builder": ("num_envs",),
    "rollout_limit": (),
    "policy": (),
    "server": ("port", "bind", "gpus", "resources", "startup_timeout_s", "readiness", "secrets", "external",
               "shareable", "api_key_args"),
}


def experiment_setup(
    experiment: Path, overrides: Sequence[str], templates: Sequence[str], allow_imports: Sequence[str] = ()
) -> dict[str, Any]:
    """The setup (see the module docstring) of ``experiment`` resolved with ``overrides`` (the
    checkpoint's, placeholders filled); ``templates`` are the overrides as the user wrote them,
    whose keys with a placeholder are left out.

    Raises:
        ConfigError: the experiment or an override is wrong (``arena run`` would exit 2).
    """
    from arena.config import load_experiment
    from arena.config.merge import leaves

    resolved = load_experiment(experiment, list(overrides), allow_imports=list(allow_imports))
    varying = [t.split("=", 1)[0].strip() for t in templates if "=" in t and ("{checkpoint}" in t or "{step}" in t)]
    flat: dict[str, Any] = {}
    for run, data in resolved.snapshot()["runs"].items():
        for section, ignored in _SECTIONS.items():
            value = data.get(section)
            for path, leaf in leaves(value if isinstance(value, dict) else {}):
                if (path and path[0] in ignored) or leaf == {}:  # an empty section: as absent
                    continue
                key = ".".join(("runs", run, section, *path))
                shared = ".".join(("shared", section, *path))
                if not any(_under(key, v) or _under(shared, v) for v in varying):
                    flat[key] = leaf
    return flat


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def setup_fingerprint(setup: dict[str, Any]) -> str:
    """``"sha256:<16 hex digits>"`` of a setup (keys sorted; equal setups, equal fingerprints)."""
    text = json.dumps(setup, sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def setup_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``["runs.toy.environment.perturbations.object_mass: 2 -> 4", ...]``: each key whose value
    differs, in key order (a key one side lacks shows ``(absent)``)."""
    from arena.results.compare import describe_value

    absent = object()
    out = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key, absent), after.get(key, absent)
        if a != b:
            show = [("(absent)" if v is absent else describe_value(v)) for v in (a, b)]
            out.append(f"{key}: {show[0]} -> {show[1]}")
    return out
