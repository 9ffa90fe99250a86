"""Spec §10 dataset contracts: T37-T52 (structure only; fake byte-only media)."""

import json

import pytest

from arena_tao_cosmos_reason.annotations import CONVERSATION, TASK_AWARE, answer_target, load_annotation
from arena_tao_cosmos_reason.dataset_inspect import check_splits, inspect_split
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import build_plan
from cosmos_fixtures import conversation_split, task_aware_split


@pytest.mark.parametrize("style", ["sharegpt", "llava", "openai"])
def test_t37_three_conversation_styles(tmp_path, style):
    ann, media = conversation_split(tmp_path, f"s_{style}", n=5, answers=["The cat jumps."], style=style)
    report = inspect_split("train", [str(ann)], [str(media)])
    assert report["dataset_family"] == CONVERSATION
    assert report["record_count"] == 5
    records, _ = load_annotation(str(ann))
    assert answer_target(records[0]) == "The cat jumps."


def test_t38_schema_errors_are_gathered(tmp_path):
    ann, media = conversation_split(tmp_path, "bad", n=3)
    records = json.loads(ann.read_text())
    records[0]["conversations"] = records[0]["conversations"][:1]
    del records[1]["video"]
    ann.write_text(json.dumps(records))
    with pytest.raises(CosmosPlanError) as err:
        inspect_split("train", [str(ann)], [str(media)])
    assert "needs >=2 turns" in str(err.value) and "has no media field" in str(err.value)


def test_t40_task_aware_item_without_answer(tmp_path):
    files, media = task_aware_split(tmp_path, "t", per_task=2)
    doc = json.loads(files[0].read_text())
    doc["items"][0]["answer"] = ""
    files[0].write_text(json.dumps(doc))
    with pytest.raises(CosmosPlanError, match="needs either >=2 conversation turns or non-empty question/answer"):
        inspect_split("train", [str(f) for f in files], [str(media)])


def test_task_aware_rejects_media_aliases(tmp_path):
    files, media = task_aware_split(tmp_path, "t", per_task=2)
    doc = json.loads(files[0].read_text())
    doc["items"][0]["video"] = doc["items"][0].pop("video_id")
    files[0].write_text(json.dumps(doc))
    with pytest.raises(CosmosPlanError, match="exactly one canonical video_id or image_id"):
        inspect_split("train", [str(f) for f in files], [str(media)])


def test_t41_same_file_for_train_and_validation_overlaps(workspace):
    ws = workspace
    a = inspect_split("train", [str(ws["train_ann"])], [str(ws["train_media"])])
    with pytest.raises(CosmosPlanError, match="train/validation overlap contains 16 logical records"):
        check_splits(a, a, 8)


def test_t43_missing_media_is_listed(workspace):
    ws = workspace
    (ws["train_media"] / "train_003.mp4").unlink()
    with pytest.raises(CosmosPlanError) as err:
        inspect_split("train", [str(ws["train_ann"])], [str(ws["train_media"])])
    message = str(err.value)
    assert "referenced media is missing" in message
    listed = json.loads(message.split("referenced media is missing: ", 1)[1])
    assert listed == [{"annotation": str(ws["train_ann"]), "record": 3, "media": "train_003.mp4"}]


def test_t44_train_and_validation_families_must_agree(workspace):
    ws = workspace
    files, media = task_aware_split(ws["root"] / "ta", "v")
    train = inspect_split("train", [str(ws["train_ann"])], [str(ws["train_media"])])
    val = inspect_split("validation", [str(f) for f in files], [str(media)])
    with pytest.raises(CosmosPlanError, match="resolve to different dataset families"):
        check_splits(train, val, 8)


def test_t46_yes_no_targets_infer_binary_accuracy(tmp_path):
    ann, media = conversation_split(tmp_path, "yn", n=6, answers=["Yes", "No"])
    report = inspect_split("validation", [str(ann)], [str(media)])
    cov = report["metric_coverage"]
    assert cov["accuracy_tasks"] == ["default"]
    assert "deterministic classification labels" in cov["inferred_metrics"]["default"]["reason"]
    assert report["evaluation_profile"]["task_semantics"]["default"]["type"] == "binary"


def test_t47_free_form_answers_are_excluded_from_accuracy(tmp_path):
    ann, media = conversation_split(tmp_path, "ff", n=4)
    report = inspect_split("validation", [str(ann)], [str(media)])
    assert report["metric_coverage"]["accuracy_tasks"] == []
    assert report["metric_coverage"]["excluded_tasks"] == ["default"]
    assert "metrics.names" in report["evaluation_profile"]["requires_user_input"]


def test_t49_declared_accuracy_metric_on_unknown_task(tmp_path):
    media = tmp_path / "m"
    media.mkdir()
    items = []
    for i in range(3):
        (media / f"c{i}.mp4").write_bytes(b"x%d" % i)
        items.append({"video_id": f"c{i}.mp4", "question": "q?", "answer": f"free text {i}"})
    ann = tmp_path / "zz.json"
    ann.write_text(json.dumps({"metadata": {"task": "Widget-Count", "metric": "accuracy"}, "items": items}))
    report = inspect_split("validation", [str(ann)], [str(media)])
    assert report["dataset_family"] == TASK_AWARE
    assert report["metric_coverage"]["accuracy_tasks"] == ["widget_count"]


def test_t50_profile_is_independent_of_customer_paths(tmp_path):
    ann, media = conversation_split(tmp_path / "customer-x" / "split-alpha", "anything")
    profile = inspect_split("train", [str(ann)], [str(media)])["profile"]
    assert profile["quantity_class"] == "small"
    assert profile["resolution"]["class"] == "up_to_720p"
    assert profile["resolution"]["median_width"] == 960
    assert profile["video"]["median_fps"] == 24


def test_t52_openai_records_with_different_messages_are_not_duplicates(tmp_path):
    media = tmp_path / "m"
    media.mkdir()
    (media / "same.mp4").write_bytes(b"v")
    records = [{"id": "r", "video": "same.mp4", "messages": [{"role": "user", "content": "Q"},
                                                            {"role": "assistant", "content": ans}]}
               for ans in ("first", "second")]
    ann = tmp_path / "oa.json"
    ann.write_text(json.dumps(records))
    assert inspect_split("train", [str(ann)], [str(media)])["record_count"] == 2
    ann.write_text(json.dumps([records[0], records[0]]))
    with pytest.raises(CosmosPlanError, match="dataset contains 1 duplicate logical records"):
        inspect_split("train", [str(ann)], [str(media)])


def test_fast_media_fingerprint_identifies_media_by_path_and_size(workspace):
    ws = workspace
    report = inspect_split("train", [str(ws["train_ann"])], [str(ws["train_media"])], fast_media=True)
    assert all("sha256" not in m for m in report["media_manifest"])


def test_task_aware_plan_uses_hybrid_supervision_and_both_tasks_counts(workspace, make_request):
    root = workspace["root"]
    tfiles, tmedia = task_aware_split(root / "ta", "tr")
    vfiles, vmedia = task_aware_split(root / "ta", "va")
    plan = build_plan(make_request(backend="cosmos-framework", train_annotation=[str(f) for f in tfiles],
                                   train_media_root=[str(tmedia)], validation_annotation=[str(f) for f in vfiles],
                                   validation_media_root=[str(vmedia)]))
    assert plan["dataset_family"] == TASK_AWARE
    assert plan["training"]["train_response_mode"] == "hybrid"
    assert plan["training"]["exposed_train_samples"] == 48
    cov = plan["datasets"]["validation"]["metric_coverage"]
    assert cov["accuracy_tasks"] == ["bcq", "mcq"] and cov["excluded_tasks"] == ["scene_description"]
