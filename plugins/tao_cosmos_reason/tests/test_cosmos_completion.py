"""Spec §10 completion, metadata and metrics: T94-T107."""

import copy
import json
import math

import pytest

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.job_metadata import finalize_metadata, validate_metadata
from arena_tao_cosmos_reason.metrics import extract_metrics, parse_status_text
from arena_tao_cosmos_reason.parity import parity

RECORDS = [
    {"status": "STARTED"},
    {"status": "RUNNING", "phase": "train_complete",
     "kpi": {"train/avg_loss": 0.5, "train/loss_numerator": 50, "train/valid_label_count": 100}},
    {"status": "RUNNING", "phase": "validation_batch_complete", "kpi": {"val/batch_loss": 9.9}},
    {"status": "RUNNING", "data": {"phase": "validation_complete"},
     "kpi": {"val/avg_loss": 0.1, "val/loss_numerator": 10, "val/valid_label_count": 100, "epoch": 1}},
    {"status": "RUNNING", "phase": "checkpoint_saved", "kpi": {"checkpoint_path": "/r/ckpt/epoch_1"}},
    {"status": "SUCCESS", "kpi": {"train/avg_loss": 7.0}},
]


@pytest.fixture
def metadata(make_request, workspace):
    path = workspace["root"] / "plan.json"
    sealed = verbs.plan(make_request(backend="cosmos-framework").model_dump(), str(path))
    meta = workspace["root"] / "metadata.json"
    meta.write_text(json.dumps(sealed["initial_metadata"]))
    return meta


def _files(tmp_path, exit_code="0", status=None):
    exit_file = tmp_path / "child_exit_code"
    if exit_code is not None:
        exit_file.write_text(exit_code + "\n")
    status_file = tmp_path / "status.json"
    status_file.write_text(status if isinstance(status, str) else json.dumps(status or [{"status": "SUCCESS"}]))
    return str(exit_file), str(status_file)


def test_t94_success(metadata, tmp_path):
    ex, st = _files(tmp_path)
    record = finalize_metadata(str(metadata), ex, st, "COMPLETED", job_id="123", allocated_nodes=["n1"])
    assert record["terminal_tao_status"] == "SUCCESS"
    assert json.loads(metadata.read_text())["terminal_tao_status"] == "SUCCESS"
    assert record["slurm"]["node_list"] == "n1"


def test_t95_jsonl_status_file(metadata, tmp_path):
    ex, st = _files(tmp_path, status='{"status":"RUNNING"}\n{"status":"SUCCESS"}\n')
    assert finalize_metadata(str(metadata), ex, st, "COMPLETED")["terminal_tao_status"] == "SUCCESS"


def test_t97_scheduler_failure_wins_over_tao_success(metadata, tmp_path):
    ex, st = _files(tmp_path)
    assert finalize_metadata(str(metadata), ex, st, "FAILED")["terminal_tao_status"] == "FAILURE"


def test_completed_scheduler_with_nonzero_child_is_failure(metadata, tmp_path):
    ex, st = _files(tmp_path, exit_code="137")
    assert finalize_metadata(str(metadata), ex, st, "COMPLETED")["terminal_tao_status"] == "FAILURE"


def test_strict_completion_needs_losses_checkpoint_and_metric(metadata, tmp_path):
    ex, st = _files(tmp_path)
    record = finalize_metadata(str(metadata), ex, st, "COMPLETED", strict_completion=True)
    assert record["terminal_tao_status"] == "FAILURE"
    ex, st = _files(tmp_path, status=RECORDS)
    record = finalize_metadata(str(metadata), ex, st, "COMPLETED", strict_completion=True,
                               evaluator={"numerator": 90, "denominator": 100})
    assert record["terminal_tao_status"] == "SUCCESS"
    assert record["metrics"] == {"average_training_loss": 0.5, "average_validation_loss": 0.1,
                                 "average_validation_accuracy": 0.9}


def test_t98_missing_exit_file(metadata, tmp_path):
    ex, st = _files(tmp_path, exit_code=None)
    with pytest.raises(CosmosPlanError, match="child-process exit-code file is missing; scheduler completion is not sufficient"):
        finalize_metadata(str(metadata), ex, st, "COMPLETED")


def test_t100_completed_without_child_exit_code_is_invalid(metadata):
    record = json.loads(metadata.read_text())
    record["scheduler"]["state"] = "COMPLETED"
    with pytest.raises(CosmosPlanError, match="invalid without a captured child-process exit code"):
        validate_metadata(record)


def test_metadata_consistency_rules(metadata):
    base = json.loads(metadata.read_text())
    assert validate_metadata(base) == {"ok": True}
    bad = copy.deepcopy(base)
    bad.update(terminal_tao_status="SUCCESS", child_process={"exit_code": 1}, scheduler={"state": "COMPLETED", "reason": None, "exit_code": "0"})
    with pytest.raises(CosmosPlanError, match="nonzero child-process exit code cannot have terminal TAO SUCCESS"):
        validate_metadata(bad)
    del bad["slurm"]
    with pytest.raises(CosmosPlanError, match=r"SLURM metadata is incomplete; missing: \['slurm'\]"):
        validate_metadata(bad)


def test_t101_token_weighted_losses_and_accuracy():
    result = extract_metrics(RECORDS, {"numerator": 90, "denominator": 100})
    assert result["train_loss"]["average"] == 0.5
    assert result["validation_loss"]["average"] == 0.1
    assert result["validation_loss"]["source_phase"] == "validation_complete"
    assert result["accuracy"]["average_validation_accuracy"] == 0.9


def test_per_task_accuracy_only_counts_accuracy_tasks():
    ev = {"per_task": {"bcq": {"correct": 7, "total": 8}, "mcq": {"correct": 2, "total": 8},
                       "scene_description": {"correct": 8, "total": 8}}}
    acc = extract_metrics(RECORDS, ev, {"accuracy_tasks": ["bcq", "mcq"]})["accuracy"]
    assert acc["average_validation_accuracy"] == 9 / 16 and acc["excluded_tasks"] == ["scene_description"]


def test_t103_step_loss_is_not_training_loss():
    with pytest.raises(CosmosPlanError, match="training loss"):
        extract_metrics([{"status": "RUNNING", "kpi": {"train/loss": 0.3}}, {"status": "SUCCESS"}])


@pytest.mark.parametrize("num,den", [(10, 0), (math.nan, 100)])
def test_t104_unweighted_or_non_finite_validation_loss(num, den):
    records = copy.deepcopy(RECORDS)
    records[3]["kpi"].update({"val/loss_numerator": num, "val/valid_label_count": den})
    records[3]["kpi"].pop("val/avg_loss")
    with pytest.raises(CosmosPlanError, match="not finite or not weighted"):
        extract_metrics(records, {"numerator": 90, "denominator": 100})


def test_status_file_shapes():
    assert len(parse_status_text(json.dumps({"records": RECORDS}))) == len(RECORDS)
    assert parse_status_text('{"status": "SUCCESS"}') == [{"status": "SUCCESS"}]
    with pytest.raises(CosmosPlanError, match="neither JSON nor JSONL"):
        parse_status_text("not json\n")


def _pair(make_request, workspace):
    paths = []
    for backend in ("cosmos-framework", "cosmos-rl"):
        path = workspace["root"] / f"{backend}.json"
        req = make_request(backend=backend, comparative=True, write_spec=str(workspace["root"] / backend / "config" / "t.toml"))
        verbs.plan(req.model_dump(), str(path))
        paths.append(str(path))
    return paths


def test_t106_parity_needs_one_plan_per_backend(make_request, workspace):
    path = workspace["root"] / "fw.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), str(path))
    plan = artifact.load(str(path))
    with pytest.raises(CosmosPlanError, match="paired parity requires one Cosmos-RL plan and one Cosmos Framework plan"):
        parity(plan, plan)


def test_t107_identical_inputs_are_launchable(make_request, workspace):
    fw, rl = _pair(make_request, workspace)
    report = verbs.parity_verb(fw, rl)
    assert all(c["status"] == "equivalent" for c in report["checks"].values())
    assert report["launch_allowed"] is True
    assert len(report["backend_syntax_differences"]) == 2
    assert "optimization.optimizer_epsilon" in report["checks"]


def test_parity_blocks_a_mismatched_pair(make_request, workspace):
    fw = workspace["root"] / "fw.json"
    rl = workspace["root"] / "rl.json"
    verbs.plan(make_request(backend="cosmos-framework", learning_rate=2e-5,
                            write_spec=str(workspace["root"] / "a" / "t.toml")).model_dump(), str(fw))
    verbs.plan(make_request(backend="cosmos-rl", write_spec=str(workspace["root"] / "b" / "t.toml")).model_dump(), str(rl))
    with pytest.raises(CosmosPlanError, match=r"paired launch blocked by invalid mismatches: \['optimization.learning_rate'\]"):
        verbs.parity_verb(str(fw), str(rl))


def test_evaluation_plan_inherits_and_asks_only_for_remaining_inputs(make_request, workspace):
    path = workspace["root"] / "plan.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), str(path))
    results = str(workspace["root"] / "eval")
    partial = verbs.evaluate(str(path), {"results_dir": results}, None)
    assert partial["ok"] is False and "checkpoint_selection" in partial["required_user_inputs"]
    with pytest.raises(CosmosPlanError, match="inherits these from the training plan"):
        verbs.evaluate(str(path), {"system_prompt": "x"}, None)
    inputs = {"results_dir": results, "checkpoint_selection": "final", "generation.max_tokens": "64", "metrics.names": "bleu"}
    out = workspace["root"] / "eval.json"
    ready = verbs.evaluate(str(path), inputs, str(out))
    assert ready["ready"] is True and ready["generation"]["max_tokens"] == 64
    assert artifact.load(str(out))["spec_bundle"]["execution"]["backend"] == "cosmos-framework"
    assert ready["automated_actions"][0]["action"] == "framework_dcp_export"


@pytest.mark.parametrize("kpi,why", [
    ({"val/avg_loss": 0.5}, "reported val/avg_loss=0.5 differs from val/loss_numerator/val/valid_label_count = 0.1"),
    ({"val/loss_numerator": math.nan, "val/avg_loss": None}, "is not finite or not weighted"),
    ({"val/valid_label_count": "many"}, "val/valid_label_count is not a number: 'many'"),
])
def test_bad_losses_fail_even_when_partial_results_are_allowed(tmp_path, kpi, why):
    """§8.2 rules 3-4: an inconsistent or non-finite loss is an error in every mode, never "missing"."""
    from typer.testing import CliRunner

    from arena_tao_cosmos_reason.cli import app

    records = copy.deepcopy(RECORDS)
    records[3]["kpi"].update(kpi)
    with pytest.raises(CosmosPlanError, match=why.replace("(", r"\(").replace(")", r"\)")):
        extract_metrics(records, None, require_complete=False)
    status = tmp_path / "status.jsonl"
    status.write_text("\n".join(json.dumps(r, allow_nan=True) for r in records) + "\n")
    result = CliRunner().invoke(app, ["extract-metrics", "--status-file", str(status), "--allow-partial"])
    assert result.exit_code == 2 and "validation loss in status record 3" in result.stderr


def test_absent_losses_are_listed_as_missing_when_partial_results_are_allowed():
    partial = extract_metrics([{"status": "SUCCESS"}], None, require_complete=False)
    assert partial["missing"] == ["training loss", "validation loss", "accuracy"]


def test_finalize_records_failure_for_an_inconsistent_loss_in_every_mode(metadata, tmp_path):
    records = copy.deepcopy(RECORDS)
    records[1]["kpi"]["train/avg_loss"] = 0.05  # the job reported a loss its own counts do not give
    for strict in (False, True):
        ex, st = _files(tmp_path, status=records)
        record = finalize_metadata(str(metadata), ex, st, "COMPLETED", strict_completion=strict,
                                   evaluator={"numerator": 90, "denominator": 100})
        assert record["terminal_tao_status"] == "FAILURE"
        assert record["completion"]["complete"] is False
        assert any("train/avg_loss=0.05 differs" in item for item in record["completion"]["unmet"])
        assert record["metrics"]["average_training_loss"] is None


def test_finalize_never_reports_success_next_to_a_bad_metric(metadata, tmp_path):
    records = copy.deepcopy(RECORDS)
    records[3]["kpi"]["val/loss_numerator"] = math.nan
    records[3]["kpi"].pop("val/avg_loss")
    ex, st = _files(tmp_path, status=records)
    record = finalize_metadata(str(metadata), ex, st, "COMPLETED")
    assert (record["terminal_tao_status"], record["completion"]["complete"]) == ("FAILURE", False)
