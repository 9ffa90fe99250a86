"""How the report and ``arena compare`` name a run's policy, and what tells two models apart.

A run's policy is named by its type and variant (:func:`policy_label`); where runs of one label
were served by different models (checkpoint, revision, image), :func:`policy_labels` adds the
model that tells them apart. :func:`models_differ` / :func:`model_differences` say what differs
between the models behind two runs of one policy type (``run_result.json``'s ``model``).
"""

from __future__ import annotations

import json
from typing import Any

def policy_label(policy: dict | None) -> str:
    """``type`` or ``type (variant)`` of a record's / manifest's policy."""
    if not policy:
        return "?"
    label = str(policy.get("type") or "?")
    return f"{label} ({policy['variant']})" if policy.get("variant") else label


#: What identifies the model that answered a run (``run_result.json``'s ``model``).
MODEL_FIELDS = ("checkpoint", "revision", "image", "image_digest", "server_metadata")


def models_differ(run_a: dict[str, Any], run_b: dict[str, Any]) -> list[str] | None:
    """What differs between the models that served two runs of the same policy type.

    ``None`` when the policy types differ (a different model is expected) or either side
    recorded no model (a local policy, or a run that never reached its server: unknown is
    not different); else the differing :data:`MODEL_FIELDS`, a mapping field (the server's
    metadata) by its differing keys (``server_metadata.n_action_steps``); empty: the same
    model as far as recorded. :func:`model_differences` gives the values too.
    """
    found = model_differences(run_a, run_b)
    return None if found is None else [d["key"] for d in found]


def model_differences(run_a: dict[str, Any], run_b: dict[str, Any]) -> list[dict[str, Any]] | None:
    """:func:`models_differ` with each side's value: ``[{"key", "a", "b"}…]``."""
    pa, pb = run_a.get("policy") or {}, run_b.get("policy") or {}
    if not pa or pa.get("type") != pb.get("type"):
        return None
    ma, mb = run_a.get("model") or {}, run_b.get("model") or {}
    if not ma or not mb:
        return None
    out: list[dict[str, Any]] = []
    for f in MODEL_FIELDS:
        va, vb = ma.get(f), mb.get(f)
        if va == vb or (va is None and vb is None):
            continue
        if isinstance(va, dict) and isinstance(vb, dict):
            out += [{"key": f"{f}.{k}", "a": va.get(k), "b": vb.get(k)} for k in sorted(set(va) | set(vb), key=str) if va.get(k) != vb.get(k)]
        else:
            out.append({"key": f, "a": va, "b": vb})
    return out


#: Fields of :data:`MODEL_FIELDS` that say *which* model (the others: how it was served).
MODEL_IDENTITY_FIELDS = ("checkpoint", "revision", "image", "image_digest")


#: The fields that name a model in a label (server metadata may hold per-connection values).
_NAMING_FIELDS = ("checkpoint", "revision", "image", "image_digest")


def _model_identity(model: Any) -> tuple | None:
    if not isinstance(model, dict):
        return None
    return tuple(json.dumps(model.get(f), sort_keys=True, default=str) for f in _NAMING_FIELDS)


def policy_labels(runs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each run's policy as the report names it: :func:`policy_label`, plus the model that
    answered where runs of that label were served by different models.

    ``pi0_remote · checkpoint …/pi05_droid`` and ``pi0_remote · checkpoint …/pi05_libero`` are
    two policies (tabled, compared and pooled apart). Models differ by checkpoint, revision,
    image or image digest; the label shows the first of these that tells them apart, a path or
    URL by its fewest last components that still do (:func:`short_names`): never a whole
    local path, which the shared report leaves out (``provenance.json`` and each run's
    ``model`` keep it). A run without a recorded model keeps the bare label.
    """
    labels = {name: policy_label(run.get("policy")) for name, run in runs.items()}
    groups: dict[str, list[str]] = {}
    for name, label in labels.items():
        if _model_identity(runs[name].get("model")) is not None:
            groups.setdefault(label, []).append(name)
    for label, names in groups.items():
        identities = {_model_identity(runs[n]["model"]) for n in names}
        if len(identities) < 2:
            continue
        field = next(f for i, f in enumerate(_NAMING_FIELDS) if len({ident[i] for ident in identities}) > 1)
        short = short_names([runs[n]["model"].get(field) for n in names])
        for name in names:
            labels[name] = f"{label} · {field.replace('_', ' ')} {short.get(runs[name]['model'].get(field), 'none')}"
    return labels


def short_names(values: list[Any]) -> dict[Any, str]:
    """Each value's shortest name that still tells it from the others: a path or URL
    (``/a/b/005000/pretrained_model``) by its fewest last ``/``-components that are distinct
    across ``values`` (``…/005000/pretrained_model``; a URL keeps its scheme,
    ``gs://…/pi05_droid``); any other value as it is. ``None`` is
    left out."""
    distinct = list(dict.fromkeys(v for v in values if v is not None))
    texts = {v: str(v) for v in distinct}
    paths = [v for v in distinct if "/" in texts[v]]
    out = {v: texts[v] for v in distinct}
    if paths:
        parts = {v: [p for p in texts[v].split("/") if p] for v in paths}
        longest = max(len(p) for p in parts.values())
        for k in range(1, longest + 1):
            tails = {v: "/".join(parts[v][-k:]) for v in paths}
            if len(set(tails.values())) == len(paths):
                break
        for v in paths:
            scheme = texts[v].split("://", 1)[0] + "://" if "://" in texts[v] else ""
            out[v] = tails[v] if len(parts[v]) <= k else f"{scheme}…/{tails[v]}"
    return out



def run_label(run: dict[str, Any]) -> str:
    """A run summary's ``policy_label`` (:func:`policy_labels`), else :func:`policy_label` of its policy."""
    return run.get("policy_label") or policy_label(run.get("policy"))
