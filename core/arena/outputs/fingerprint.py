"""The protocol fingerprint: what makes two success rates comparable, on every record.

An environment's :meth:`~arena.envs.base.Environment.episode_info` may hold a
``"protocol"`` dict (:data:`PROTOCOL_KEY`): the benchmark and its suite version, the
simulator packages' versions, the init-state source and its hash, the seeding mode, the
image size, the settle steps and the step limit. The rollout moves it to the record's
top-level ``protocol`` and adds the policy's embodiment adapter and its version
(:func:`adapter_fingerprint`); ``run_result.json`` carries the records' common
fingerprint (:func:`common_fingerprint`), and ``arena compare`` refuses two runs whose
fingerprints differ (:func:`fingerprint_differences`) — but for two runs whose fingerprints
declare the same episodes (:data:`EQUIVALENCE_KEY`, :func:`declared_equivalence`): the same
simulator behind two wrappers (LeRobot's PushT through the native ``pusht`` and through the
``lerobot_env`` bridge) plays the same episode for the same seed, so those runs are compared
paired without ``--force``.

What is *not* in it on purpose: how the envs are spread over processes (``workers``) and
which interpreter runs them (``python``): results do not depend on the first, and the
simulator versions say what matters of the second.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: The ``episode_info`` key (and record field) holding the fingerprint.
PROTOCOL_KEY = "protocol"
#: The fingerprint key an environment declares its episodes with when another environment
#: (another wrapper of the same simulator) plays the same ones: a dict naming the simulator and
#: its version, the task, how a seed becomes an episode, the observation and the step limit.
#: Two runs whose fingerprints carry equal values here play the same episode for the same seed.
EQUIVALENCE_KEY = "episodes_as"
#: A difference's value for a key one fingerprint does not have.
ABSENT = "(absent)"
#: ``common_fingerprint``'s value when a run's records disagree.
MIXED = "mixed (the run's episodes disagree)"


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """``{distribution: version}`` as installed in this interpreter (``None``: not installed)."""
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def array_sha256(array: Any) -> str:
    """``"sha256:<hex>"`` of an array's dtype, shape and C-order bytes."""
    a = np.ascontiguousarray(np.asarray(array))
    digest = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    digest.update(a.tobytes())
    return "sha256:" + digest.hexdigest()


def adapter_fingerprint(adapter: Any) -> dict[str, Any] | None:
    """``{"class": "module:Name", "distribution", "version"}`` of an embodiment adapter
    (``None`` for none). The version is that of the installed distribution that ships the
    adapter's module (``None`` when it is not an installed distribution)."""
    if adapter is None:
        return None
    from importlib import metadata

    cls = type(adapter)
    top = cls.__module__.split(".")[0]
    dists = metadata.packages_distributions().get(top) or []
    dist = dists[0] if dists else None
    return {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "distribution": dist,
        "version": package_versions([dist])[dist] if dist else None,
    }


def common_fingerprint(fingerprints: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | str | None:
    """The fingerprint all of a run's records share; :data:`MIXED` when they differ;
    ``None`` when no record has one."""
    seen: dict[str, Any] | None = None
    for fp in fingerprints:
        if fp is None:
            continue
        if seen is None:
            seen = dict(fp)
        elif dict(fp) != seen:
            return MIXED
    return seen


def flatten(fingerprint: Mapping[str, Any] | str | None, prefix: str = PROTOCOL_KEY) -> dict[str, Any]:
    """``{"protocol.simulators.mujoco": "3.3.7", ...}``: leaf paths of a fingerprint."""
    if not isinstance(fingerprint, Mapping):
        return {prefix: fingerprint}
    flat: dict[str, Any] = {}
    for key, value in fingerprint.items():
        path = f"{prefix}.{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, path))
        else:
            flat[path] = value
    return flat


def fingerprint_differences(a: Mapping[str, Any] | str | None, b: Mapping[str, Any] | str | None) -> list[dict[str, Any]]:
    """``[{key, a, b}]`` for each leaf where two fingerprints disagree.

    ``None`` is unknown (records written before fingerprints existed): two unknowns agree,
    one unknown is a single difference keyed ``protocol``. A key only one side has shows
    :data:`ABSENT` on the other.
    """
    if a is None and b is None:
        return []
    if a is None or b is None:
        unknown = "unknown (records without a protocol fingerprint)"
        return [{"key": PROTOCOL_KEY, "a": unknown if a is None else "known", "b": unknown if b is None else "known"}]
    flat_a, flat_b = flatten(a), flatten(b)
    keys = sorted(set(flat_a) | set(flat_b))
    return [
        {"key": k, "a": flat_a.get(k, ABSENT), "b": flat_b.get(k, ABSENT)}
        for k in keys
        if k not in flat_a or k not in flat_b or flat_a[k] != flat_b[k]
    ]


def declared_equivalence(a: Mapping[str, Any] | str | None, b: Mapping[str, Any] | str | None) -> dict[str, Any] | None:
    """The episodes two common fingerprints (:func:`common_fingerprint`) both declare
    (:data:`EQUIVALENCE_KEY`), when they declare the same; else ``None``."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return None
    declared = a.get(EQUIVALENCE_KEY)
    return dict(declared) if isinstance(declared, Mapping) and declared and declared == b.get(EQUIVALENCE_KEY) else None
