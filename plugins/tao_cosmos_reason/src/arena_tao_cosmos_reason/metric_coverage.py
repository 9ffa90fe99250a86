"""Which tasks define deterministic accuracy, and the evaluation profile (spec §4.9)."""

from __future__ import annotations

ACCURACY_ALIASES = {"bcq": "binary", "binary": "binary", "binary_choice": "binary", "mcq": "mcq", "multiple_choice": "mcq"}
ACCURACY_METRICS = {"accuracy", "exact_match_accuracy"}
INFERRED_REASON = "all conversation targets are deterministic classification labels"
AGGREGATE = "example_weighted_over_accuracy_defined_tasks"
NORMALIZATION = "tao-cosmos-shared-v2"


def normalize_label(text: str) -> str:
    """Lower-case, trimmed, surrounding ``()`` and trailing ``.`` removed."""
    return text.strip().casefold().strip("().").strip()


def _labels_type(labels: set[str]) -> tuple[str | None, str] | None:
    if labels and labels <= {"yes", "no"}:
        return "binary", "label_vocabulary_yes_no"
    if labels and labels <= {"a", "b"}:
        return None, "ambiguous_a_b_label_vocabulary"
    if labels and labels <= {"a", "b", "c", "d"}:
        return "mcq", "label_vocabulary_a_to_d"
    return None


def metric_coverage(task_targets: dict[str, list[str | None]], task_metrics: dict[str, list[str]]) -> dict:
    """Classify each task and build ``metric_coverage`` and ``evaluation_profile``.

    Args:
        task_targets: normalized task -> every record's answer target (``None`` = no target).
        task_metrics: normalized task -> declared metric names (record or file metadata).
    """
    accuracy, excluded, inferred, semantics, reasons = [], [], {}, {}, {}
    declared_other: list[str] = []
    for task in sorted(task_targets):
        targets = task_targets[task]
        declared = {m.casefold() for m in task_metrics.get(task, [])}
        declared_other.extend(sorted(m for m in task_metrics.get(task, []) if m.casefold() not in ACCURACY_METRICS))
        labels = {normalize_label(t) for t in targets if t is not None}
        vocabulary = _labels_type(labels) if targets and all(t is not None for t in targets) else None
        if task in ACCURACY_ALIASES:
            accuracy.append(task)
            semantics[task] = {"type": ACCURACY_ALIASES[task], "source": "task_name_alias"}
        elif declared & ACCURACY_METRICS:
            accuracy.append(task)
            kind, source = vocabulary if vocabulary else (None, "declared_accuracy_unknown_answer_semantics")
            semantics[task] = {"type": kind, "source": source}
        elif vocabulary is not None:
            accuracy.append(task)
            inferred[task] = {"metric": "accuracy", "reason": INFERRED_REASON}
            semantics[task] = {"type": vocabulary[0], "source": vocabulary[1]}
        else:
            excluded.append(task)
            semantics[task] = {"type": "text", "source": "generative_targets"}
            reasons[task] = "generative task: exact match is not counted as accuracy"
    unresolved = [t for t in accuracy if semantics[t]["type"] is None]
    metric_names = sorted(set(declared_other))
    requires = []
    if unresolved:
        requires.append("task.type")
    if excluded and not metric_names:
        requires.append("metrics.names")
    known = {s["type"] for s in semantics.values() if s["type"] is not None}
    return {
        "metric_coverage": {
            "accuracy_tasks": accuracy,
            "excluded_tasks": excluded,
            "excluded_reasons": reasons,
            "task_metrics": {t: sorted(task_metrics.get(t, [])) for t in sorted(task_targets)},
            "inferred_metrics": inferred,
            "aggregate": AGGREGATE,
        },
        "evaluation_profile": {
            "inferred_task_type": next(iter(known)) if len(known) == 1 else None,
            "answer_type": "letter" if known == {"mcq"} else "freeform",
            "task_semantics": semantics,
            "metric_names": metric_names,
            "normalization": NORMALIZATION,
            "requires_user_input": requires,
            "unresolved_accuracy_tasks": unresolved,
        },
    }
