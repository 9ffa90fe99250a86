"""Status records, token-weighted losses, the evaluator metric and the completion rule (spec §8)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from arena_tao_cosmos_reason.errors import CosmosPlanError

TRAIN_PHASES = ("train_complete", "training_complete")
VAL_PHASE = "validation_complete"
TERMINAL = ("SUCCESS", "FAILURE")
REL_TOL = 1e-6


def parse_status_text(text: str, source: str = "status file") -> list[dict]:
    """JSON array, ``{records: [...]}``, one object, or JSON Lines -> list of records."""
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            raise CosmosPlanError(f"TAO structured {source} is neither JSON nor JSONL") from None
    if isinstance(data, dict):
        data = data["records"] if isinstance(data.get("records"), list) else [data]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise CosmosPlanError(f"TAO structured {source} is neither JSON nor JSONL records")
    return data


def read_status_file(path: str) -> list[dict]:
    file = Path(path)
    if not file.is_file():
        raise CosmosPlanError(f"TAO structured status file is missing: {path}")
    return parse_status_text(file.read_text(encoding="utf-8"))


def _phase(record: dict) -> str | None:
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    return record.get("phase") or data.get("phase")


def _kpi(record: dict) -> dict:
    data = record.get("data") if isinstance(record.get("data"), dict) else {}
    kpi = record.get("kpi") if isinstance(record.get("kpi"), dict) else data.get("kpi")
    return kpi if isinstance(kpi, dict) else {}


def terminal_status(records: list[dict]) -> str | None:
    """The upper-cased status of the last SUCCESS/FAILURE record, else ``None``."""
    for record in reversed(records):
        status = str(record.get("status", "")).upper()
        if status in TERMINAL:
            return status
    return None


def _weighted(records: list[dict], phases: tuple[str, ...], prefix: str, label: str) -> dict:
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        kpi = _kpi(record)
        if _phase(record) not in phases:
            continue
        num, den = kpi.get(f"{prefix}/loss_numerator"), kpi.get(f"{prefix}/valid_label_count")
        if num is None or den is None:
            continue
        try:
            num, den = float(num), float(den)
        except (TypeError, ValueError):
            raise CosmosPlanError(f"{label} numerator/denominator are not numbers (record {index})") from None
        if not (math.isfinite(num) and math.isfinite(den)) or den <= 0:
            raise CosmosPlanError(f"{label} is not finite or not weighted: numerator={num}, denominator={den} (record {index})")
        average = num / den
        reported = kpi.get(f"{prefix}/avg_loss")
        if reported is not None and not math.isclose(float(reported), average, rel_tol=REL_TOL, abs_tol=1e-12):
            raise CosmosPlanError(f"{label} reported {reported} differs from numerator/denominator {average}")
        return {"average": average, "numerator": num, "denominator": den, "source_phase": _phase(record),
                "record_index": index}
    raise CosmosPlanError(f"no token-weighted {label} ({'/'.join(phases)} record with {prefix}/loss_numerator and "
                          f"{prefix}/valid_label_count)")


def evaluator_metric(result: dict, coverage: dict | None = None) -> dict:
    """Example-weighted accuracy over accuracy-defined tasks from an evaluator result.

    Accepts ``{per_task: {task: {correct, total}}}`` or ``{numerator, denominator}``.
    """
    accuracy_tasks = set((coverage or {}).get("accuracy_tasks") or [])
    per_task, excluded = {}, []
    if isinstance(result.get("per_task"), dict):
        num = den = 0.0
        for task, row in sorted(result["per_task"].items()):
            if accuracy_tasks and task not in accuracy_tasks:
                excluded.append(task)
                continue
            correct, total = float(row["correct"]), float(row["total"])
            per_task[task] = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
            num, den = num + correct, den + total
    else:
        num, den = result.get("numerator"), result.get("denominator")
        if num is None or den is None:
            raise CosmosPlanError("evaluator result has no accuracy numerator/denominator")
        num, den = float(num), float(den)
    if not den or not math.isfinite(num) or not math.isfinite(den):
        raise CosmosPlanError("evaluator accuracy is not finite or has a zero denominator")
    return {"average_validation_accuracy": num / den, "numerator": num, "denominator": den, "per_task": per_task,
            "excluded_tasks": excluded, "aggregation": "example_weighted_over_accuracy_defined_tasks",
            "coverage": coverage}


def extract_metrics(records: list[dict], evaluator: dict | None = None, coverage: dict | None = None,
                    require_complete: bool = True) -> dict:
    """The metrics summary; with ``require_complete`` every missing piece is an error."""
    out: dict = {"train_loss": None, "validation_loss": None, "accuracy": None, "missing": []}
    for key, phases, prefix, label in (("train_loss", TRAIN_PHASES, "train", "training loss"),
                                       ("validation_loss", (VAL_PHASE,), "val", "validation loss")):
        try:
            out[key] = _weighted(records, phases, prefix, label)
        except CosmosPlanError:
            if require_complete:
                raise
            out["missing"].append(label)
    if evaluator is not None:
        out["accuracy"] = evaluator_metric(evaluator, coverage)
    elif require_complete and (coverage or {}).get("accuracy_tasks"):
        raise CosmosPlanError("evaluator accuracy is required: the validation contract lists accuracy tasks")
    else:
        out["missing"].append("accuracy")
    out["checkpoint_saved"] = any(_phase(r) == "checkpoint_saved" for r in records)
    out["terminal_status"] = terminal_status(records)
    return out


def completion(child_exit: int | None, scheduler_state: str | None, records: list[dict], metrics: dict) -> dict:
    """All six conditions of spec §8.3; ``complete`` only when none is missing."""
    failed = []
    if child_exit != 0:
        failed.append("child exit code is not 0")
    if (scheduler_state or "").upper() != "COMPLETED":
        failed.append("scheduler state is not COMPLETED")
    if terminal_status(records) != "SUCCESS":
        failed.append("last TAO status record is not SUCCESS")
    if not metrics.get("train_loss") or not metrics.get("validation_loss"):
        failed.append("finite token-weighted training and validation losses")
    if not metrics.get("checkpoint_saved"):
        failed.append("final checkpoint_saved event")
    if not metrics.get("accuracy"):
        failed.append("final evaluator metric")
    return {"complete": not failed, "unmet": failed}
