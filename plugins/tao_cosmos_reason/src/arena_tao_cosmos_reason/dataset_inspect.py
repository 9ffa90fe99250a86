"""Per-split dataset inspection, profile and fingerprints; cross-split checks (spec §4.5-4.8).

``inspect_split`` is the one expensive read of a split: it loads every annotation, checks
every record, resolves and stats every media file (hashing it unless fast mode), and returns
a JSON-safe report that the sealed plan carries.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from pathlib import Path

from arena_tao_cosmos_reason import annotations as ann
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.hashing import atomic_write_text, pretty_json, sha256_bytes, sha256_file, stable_hash
from arena_tao_cosmos_reason.metric_coverage import metric_coverage


def _positive(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _declared(record: dict, metadata: dict) -> dict:
    out = {}
    for source in (metadata, record):  # the record overrides the file metadata
        res = source.get("resolution")
        if isinstance(res, dict):
            out["width"], out["height"] = _positive(res.get("width")) or out.get("width"), _positive(res.get("height")) or out.get("height")
        elif isinstance(res, list) and len(res) == 2:
            out["width"], out["height"] = _positive(res[0]) or out.get("width"), _positive(res[1]) or out.get("height")
        for name, keys in (("width", ("width", "video_width")), ("height", ("height", "video_height")),
                           ("fps", ("fps", "video_fps")), ("duration", ("duration", "duration_seconds"))):
            for key in keys:
                if _positive(source.get(key)):
                    out[name] = _positive(source.get(key))
                    break
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _num(value: float | None):
    return int(value) if value is not None and float(value).is_integer() else value


def _resolution_class(width: float | None, height: float | None) -> str:
    if not width or not height:
        return "unknown"
    area = width * height
    if area <= 1280 * 720:
        return "up_to_720p"
    if area <= 1920 * 1080:
        return "up_to_1080p"
    return "above_1080p"


def inspect_split(
    split: str,
    annotation_paths: list[str],
    media_roots: list[str],
    family: str = "auto",
    tasks: list[str] | None = None,
    fast_media: bool = False,
    sample_limit: int | None = None,
) -> dict:
    """Inspect one split (``train`` or ``validation``).

    Raises:
        CosmosPlanError: inaccessible files or roots, mixed families, schema errors (first
            20), missing media (first 20), duplicates, or an empty task selection.
    """
    if not annotation_paths:
        raise CosmosPlanError(f"{split} annotation is required ({split}_annotation)")
    if len(media_roots) not in (1, len(annotation_paths)):
        raise CosmosPlanError(f"supply one shared media root or one media root per annotation: {split}_media_root has "
                              f"{len(media_roots)} entries for {len(annotation_paths)} {split}_annotation files")
    for root in media_roots:
        if not Path(root).expanduser().is_dir():
            raise CosmosPlanError(f"media root is inaccessible: {root} ({split}_media_root)")
    wanted = {ann.normalize_task(t) for t in tasks or []}
    loaded, families = [], set()
    for path in annotation_paths:
        try:
            records, metadata = ann.load_annotation(path)
        except CosmosPlanError as exc:
            raise CosmosPlanError(f"{exc} ({split}_annotation)") from None
        detected = ann.detect_family(records, metadata)
        if family != "auto" and detected != family:
            raise CosmosPlanError(f"dataset schema validation failed: {path}: detected {detected}, requested {family}")
        families.add(detected)
        loaded.append((path, records, metadata))
    if len(families) != 1:
        raise CosmosPlanError("annotation files mix incompatible dataset families")
    fam = families.pop()
    if fam == ann.CONVERSATION and len(annotation_paths) != 1:
        raise CosmosPlanError("video_conversation requires exactly one annotation file per split")
    if fam == ann.CONVERSATION and wanted:
        raise CosmosPlanError("task selection is only valid for task-aware datasets")

    errors, missing, keys = [], [], []
    task_counts: Counter = Counter()
    task_targets: dict[str, list] = {}
    task_metric_names: dict[str, set] = {}
    media_sizes: dict[str, int] = {}
    widths, heights, fpss, durations = [], [], [], []
    absolute_dirs: set[str] = set()
    manifest, selected_records = [], []
    for index, (path, records, metadata) in enumerate(loaded):
        root = media_roots[0] if len(media_roots) == 1 else media_roots[index]
        count = 0
        for number, record in enumerate(records):
            where = f"{path}[{number}]"
            task = ann.record_task(record, metadata)
            if fam == ann.TASK_AWARE and task is None:
                errors.append(f"{where}: task-aware record has no task")
                continue
            if wanted and task not in wanted:
                continue
            errors.extend(ann.record_errors(record, fam, where))
            fields = ann.CANONICAL_TASK_MEDIA if fam == ann.TASK_AWARE else ann.MEDIA_FIELDS
            values = ann.media_values(record, fields)
            resolved = [v if os.path.isabs(v) else os.path.join(os.path.abspath(os.path.expanduser(root)), v) for v in values]
            absolute_dirs.update(os.path.dirname(os.path.normpath(v)) for v in values if os.path.isabs(v))
            for value, full in zip(values, resolved, strict=False):
                if full in media_sizes:
                    continue
                if os.path.isfile(full):
                    media_sizes[full] = os.path.getsize(full)
                else:
                    missing.append({"annotation": path, "record": number, "media": value})
            name = task or "default"
            task_counts[name] += 1
            task_targets.setdefault(name, []).append(ann.answer_target(record))
            declared_metric = record.get("metric", metadata.get("metric"))
            names = task_metric_names.setdefault(name, set())
            if isinstance(declared_metric, str):
                names.add(declared_metric)
            elif isinstance(declared_metric, list):
                names.update(m for m in declared_metric if isinstance(m, str))
            keys.append(ann.record_key(record, values))
            dims = _declared(record, metadata)
            widths += [dims["width"]] if "width" in dims else []
            heights += [dims["height"]] if "height" in dims else []
            fpss += [dims["fps"]] if "fps" in dims else []
            durations += [dims["duration"]] if "duration" in dims else []
            item = dict(record)
            if fam == ann.TASK_AWARE:
                item["task"] = name
            selected_records.append(item)
            count += 1
        resolved_path = os.path.realpath(os.path.expanduser(path))
        manifest.append({"original": path, "resolved": resolved_path, "sha256": sha256_file(resolved_path),
                         "count": count, "metadata": metadata})
    if errors:
        raise CosmosPlanError(f"dataset schema validation failed: {errors[:20]}")
    if missing:
        raise CosmosPlanError(f"referenced media is missing: {json.dumps(missing[:20])}")
    if wanted and not keys:
        raise CosmosPlanError("task selection produced zero records")
    duplicates = len(keys) - len(set(keys))
    if duplicates:
        raise CosmosPlanError(f"dataset contains {duplicates} duplicate logical records")

    media_manifest = []
    for path in sorted(media_sizes):
        entry = {"path": path, "size": media_sizes[path]}
        if not fast_media:
            entry["sha256"] = sha256_file(path)
        media_manifest.append(entry)
    sizes = sorted(media_sizes.values())
    record_count = len(keys)
    unique = len(media_sizes)
    median_w, median_h = _median(widths), _median(heights)
    sorted_keys = sorted(keys)
    coverage = metric_coverage(task_targets, {t: sorted(n) for t, n in task_metric_names.items()})
    return {
        "split": split,
        "dataset_family": fam,
        "annotations": list(annotation_paths),
        "media_roots": list(media_roots),
        "record_count": record_count,
        "selected_tasks": sorted(wanted),
        "tasks": dict(sorted(task_counts.items())),
        "profile": {
            "quantity_class": "small" if record_count < 10_000 else "medium" if record_count < 100_000 else "large",
            "unique_media_count": unique,
            "records_per_media": record_count / unique if unique else 0.0,
            "media_reuse_class": "reused" if record_count > unique else "mostly_unique",
            "media_extensions": sorted({Path(p).suffix.lower() for p in media_sizes if Path(p).suffix}),
            "media_bytes": {"total": sum(sizes), "min": sizes[0] if sizes else 0,
                            "median": _num(_median(sizes)) if sizes else 0, "max": sizes[-1] if sizes else 0},
            "resolution": {
                "sample_count": min(len(widths), len(heights)),
                "median_width": _num(median_w), "median_height": _num(median_h),
                "max_width": _num(max(widths)) if widths else None,
                "max_height": _num(max(heights)) if heights else None,
                "class": _resolution_class(median_w, median_h),
            },
            "video": {"fps_sample_count": len(fpss), "median_fps": _num(_median(fpss)),
                      "duration_sample_count": len(durations), "median_duration_seconds": _num(_median(durations))},
            "annotation_metadata": [m["metadata"] for m in manifest],
        },
        "annotation_manifest": manifest,
        "media_manifest": media_manifest,
        "media_fingerprint_mode": "path_and_size" if fast_media else "full_content",
        "absolute_media_dirs": sorted(absolute_dirs),
        "record_keys_sha256": stable_hash(sorted_keys),
        "record_key_set": sorted_keys,
        "media_fingerprint": stable_hash(media_manifest),
        "dataset_fingerprint": stable_hash({"records": sorted_keys, "media": media_manifest,
                                            "tasks": dict(sorted(task_counts.items()))}),
        **coverage,
        "_records": selected_records,
    }


def check_splits(train: dict, validation: dict, total_gpus: int) -> None:
    """Family agreement, train/validation overlap and the per-GPU record minimum."""
    if train["dataset_family"] != validation["dataset_family"]:
        raise CosmosPlanError("training and validation annotations resolve to different dataset families")
    overlap = set(train["record_key_set"]) & set(validation["record_key_set"])
    if overlap:
        raise CosmosPlanError(f"train/validation overlap contains {len(overlap)} logical records")
    if train["record_count"] < total_gpus or validation["record_count"] < total_gpus:
        raise CosmosPlanError(
            "train and validation datasets must each contain at least one record per global GPU "
            f"(total_gpus={total_gpus} = nodes x gpus_per_node; train has {train['record_count']} records, validation "
            f"{validation['record_count']}): use at most {min(train['record_count'], validation['record_count'])} GPUs "
            "or add records"
        )


def materialize_manifest(records: list[dict], family: str, output: str, sample_limit: int | None,
                         selected_tasks: list[str], sources: list[str], write=None) -> dict:
    """Write a merged or subset manifest atomically (spec §4.10); never over a source file.

    ``write(path, text) -> sha256`` writes into the compute frame (default: the local atomic
    writer; a remote frame passes its ssh writer).
    """
    if any(os.path.realpath(output) == os.path.realpath(s) or os.path.normpath(output) == os.path.normpath(s)
           for s in sources):
        raise CosmosPlanError(f"materialized output must not overwrite a source annotation: {output}")
    chosen = records[:sample_limit] if sample_limit else list(records)
    payload = ({"format": ann.TASK_AWARE_FORMAT, "metadata": {"task": "mixed"}, "items": chosen}
               if family == ann.TASK_AWARE else chosen)
    text = pretty_json(payload)
    if write is None:
        atomic_write_text(output, text)
        digest = sha256_bytes(text.encode("utf-8"))
    else:
        digest = write(output, text)
    return {"record_count": len(chosen), "sha256": digest, "sample_limit": sample_limit,
            "selected_tasks": selected_tasks, "dataset_family": family, "output": str(output)}
