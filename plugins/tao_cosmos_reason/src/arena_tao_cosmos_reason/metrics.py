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


def _weighted(records: list[dict], phases: tuple[str, ...], prefix: str, label: str) -> dict | None:
    """The last ``phases`` record carrying both ``<prefix>/loss_numerator`` and
    ``<prefix>/valid_label_count``, recomputed; ``None`` when no record carries them.

    Raises:
        CosmosPlanError: the record's values are not numbers, not finite, the denominator is not
            positive, or a reported ``<prefix>/avg_loss`` disagrees with numerator/denominator.
            A bad value is never "missing": it fails in every mode (spec §8.2 rules 3-4).
    """
    num_key, den_key, avg_key = f"{prefix}/loss_numerator", f"{prefix}/valid_label_count", f"{prefix}/avg_loss"
    for index in range(len(records) - 1, -1, -1):
        record = records[index]
        kpi = _kpi(record)
        if _phase(record) not in phases:
            continue
        if kpi.get(num_key) is None or kpi.get(den_key) is None:
            continue
        where = f"{label} in status record {index} ({_phase(record)})"
        values = {}
        for key in (num_key, den_key) + ((avg_key,) if kpi.get(avg_key) is not None else ()):
            raw = kpi[key]
            if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
                raise CosmosPlanError(f"{where}: {key} is not a number: {raw!r}")
            try:
                values[key] = float(raw)
            except ValueError:
                raise CosmosPlanError(f"{where}: {key} is not a number: {raw!r}") from None
        num, den = values[num_key], values[den_key]
        if not (math.isfinite(num) and math.isfinite(den)) or den <= 0:
            raise CosmosPlanError(f"{where} is not finite or not weighted: {num_key}={num}, {den_key}={den}")
        average = num / den
        if avg_key in values:
            reported = values[avg_key]
            if not math.isfinite(reported) or not math.isclose(reported, average, rel_tol=REL_TOL, abs_tol=1e-12):
                raise CosmosPlanError(f"{where}: reported {avg_key}={reported} differs from {num_key}/{den_key} = "
                                      f"{average} (relative tolerance {REL_TOL})")
        return {"average": average, "numerator": num, "denominator": den, "source_phase": _phase(record),
                "record_index": index}
    return None


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CosmosPlanError(f"{where} must be a number, got {value!r}")
    return float(value)


def evaluator_metric(result, coverage: dict | None = None, source: str = "evaluator result") -> dict:
    """Example-weighted accuracy over accuracy-defined tasks from an evaluator result.

    Accepts ``{per_task: {task: {correct, total}}}`` or ``{numerator, denominator}``.

    Raises:
        CosmosPlanError: the result is not such an object (naming ``source`` and the field), or the
            accuracy is not finite or has a zero denominator.
    """
    if not isinstance(result, dict):
        raise CosmosPlanError(f"{source} must be a JSON object with per_task or numerator/denominator, "
                              f"got a JSON {type(result).__name__ if not isinstance(result, list) else 'array'}")
    accuracy_tasks = set((coverage or {}).get("accuracy_tasks") or [])
    per_task, excluded = {}, []
    if "per_task" in result:
        if not isinstance(result["per_task"], dict):
            raise CosmosPlanError(f"{source}: per_task must be an object of {{task: {{correct, total}}}}")
        num = den = 0.0
        for task, row in sorted(result["per_task"].items()):
            if accuracy_tasks and task not in accuracy_tasks:
                excluded.append(task)
                continue
            if not isinstance(row, dict):
                raise CosmosPlanError(f"{source}: per_task.{task} must be an object with correct and total")
            correct = _number(row.get("correct"), f"{source}: per_task.{task}.correct")
            total = _number(row.get("total"), f"{source}: per_task.{task}.total")
            per_task[task] = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
            num, den = num + correct, den + total
    else:
        if "numerator" not in result or "denominator" not in result:
            raise CosmosPlanError(f"{source} has no accuracy numerator/denominator (or per_task)")
        num = _number(result["numerator"], f"{source}: numerator")
        den = _number(result["denominator"], f"{source}: denominator")
    if not den or not math.isfinite(num) or not math.isfinite(den):
        raise CosmosPlanError(f"{source}: accuracy is not finite or has a zero denominator")
    return {"average_validation_accuracy": num / den, "numerator": num, "denominator": den, "per_task": per_task,
            "excluded_tasks": excluded, "aggregation": "example_weighted_over_accuracy_defined_tasks",
            "coverage": coverage}


LOSSES = (("train_loss", TRAIN_PHASES, "train", "training loss"),
          ("validation_loss", (VAL_PHASE,), "val", "validation loss"))


def collect_metrics(records: list[dict], evaluator: dict | None = None, coverage: dict | None = None,
                    evaluator_source: str = "evaluator result") -> dict:
    """Every metric the records and evaluator result hold, without judging completeness.

    Returns ``{train_loss, validation_loss, accuracy, missing[], invalid[], checkpoint_saved,
    terminal_status}``: ``missing`` names what is absent, ``invalid`` says what is present but
    inconsistent or non-finite (never counted as missing).

    Raises:
        CosmosPlanError: the evaluator result is malformed (an input error, not a job outcome).
    """
    out: dict = {"train_loss": None, "validation_loss": None, "accuracy": None, "missing": [], "invalid": []}
    for key, phases, prefix, label in LOSSES:
        try:
            out[key] = _weighted(records, phases, prefix, label)
        except CosmosPlanError as exc:
            out["invalid"].append(str(exc))
            continue
        if out[key] is None:
            out["missing"].append(label)
    if evaluator is not None:
        out["accuracy"] = evaluator_metric(evaluator, coverage, evaluator_source)
    else:
        out["missing"].append("accuracy")
    out["checkpoint_saved"] = any(_phase(r) == "checkpoint_saved" for r in records)
    out["terminal_status"] = terminal_status(records)
    return out


def extract_metrics(records: list[dict], evaluator: dict | None = None, coverage: dict | None = None,
                    require_complete: bool = True, evaluator_source: str = "evaluator result") -> dict:
    """The metrics summary (spec §8.2).

    A metric that is absent is listed in ``missing`` (and is an error with ``require_complete``);
    a metric that is present but inconsistent or non-finite is an error in every mode.
    """
    out = collect_metrics(records, evaluator, coverage, evaluator_source)
    if out["invalid"]:
        raise CosmosPlanError("; ".join(out["invalid"]))
    if require_complete:
        for key, phases, prefix, label in LOSSES:
            if out[key] is None:
                raise CosmosPlanError(f"no token-weighted {label} ({'/'.join(phases)} record with "
                                      f"{prefix}/loss_numerator and {prefix}/valid_label_count)")
        if out["accuracy"] is None and (coverage or {}).get("accuracy_tasks"):
            raise CosmosPlanError("evaluator accuracy is required: the validation contract lists accuracy tasks")
    del out["invalid"]
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
    failed.extend(metrics.get("invalid") or [])
    if not metrics.get("train_loss") or not metrics.get("validation_loss"):
        failed.append("finite token-weighted training and validation losses")
    if not metrics.get("checkpoint_saved"):
        failed.append("final checkpoint_saved event")
    if not metrics.get("accuracy"):
        failed.append("final evaluator metric")
    return {"complete": not failed, "unmet": failed}
