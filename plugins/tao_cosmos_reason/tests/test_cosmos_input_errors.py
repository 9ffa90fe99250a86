"""Errors a user can act on (spec §0.3): ``ERROR:`` and exit 2, never a traceback; every input error
names its field or file; every verb prints something with ``--format text``; the Python API takes
``pathlib.Path`` wherever it takes a path."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.cli import app
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import build_plan
from arena_tao_cosmos_reason.request import PlanRequest

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _fails_cleanly(args, *needles):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("ERROR: ") and "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in result.stderr, result.stderr
    return result.stderr


@pytest.mark.parametrize("payload,needles", [
    ([{"task": "bcq", "correct": 1}], ["must be a JSON object", "got a JSON array"]),
    ({"per_task": {"bcq": {"correct": "seven", "total": 8}}}, ["per_task.bcq.correct must be a number"]),
    ({"per_task": [1, 2]}, ["per_task must be an object"]),
    ({"numerator": 9}, ["has no accuracy numerator/denominator"]),
])
def test_malformed_evaluator_output_is_named_not_a_traceback(tmp_path, payload, needles):
    evaluator = tmp_path / "predictions.json"
    evaluator.write_text(json.dumps(payload))
    _fails_cleanly(["extract-metrics", "--status-file", EXAMPLES / "status_records.jsonl", "--evaluator", evaluator],
                   str(evaluator), *needles)


def test_unreadable_or_invalid_json_inputs_name_their_file(tmp_path):
    broken = tmp_path / "predictions.json"
    broken.write_text("{not json")
    _fails_cleanly(["extract-metrics", "--status-file", EXAMPLES / "status_records.jsonl", "--evaluator", broken],
                   f"evaluator result {broken} is not valid JSON")
    _fails_cleanly(["validate-metadata", tmp_path / "absent.json"], f"cannot read job metadata {tmp_path / 'absent.json'}")
    array = tmp_path / "meta.json"
    array.write_text("[1, 2]")
    _fails_cleanly(["validate-metadata", array], str(array), "must be a JSON object")
    bad_yaml = tmp_path / "request.yaml"
    bad_yaml.write_text("epochs: [1,\n")
    _fails_cleanly(["plan", "--plan-artifact", tmp_path / "p.json", "--request", bad_yaml],
                   f"request file {bad_yaml} is not valid JSON or YAML")


def test_evaluate_input_errors_name_the_field(make_request, workspace):
    plan = workspace["root"] / "plan.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), plan)
    _fails_cleanly(["evaluate", "--plan-artifact", plan, "--input", "generation.max_tokens=abc"],
                   "generation.max_tokens must be a positive integer, got 'abc'")
    _fails_cleanly(["evaluate", "--plan-artifact", plan, "--input", "generation.max_tokens=-3"],
                   "generation.max_tokens must be a positive integer")
    _fails_cleanly(["evaluate", "--plan-artifact", plan, "--input", "checkpoint_selection"],
                   "--input expects KEY=VALUE, got 'checkpoint_selection'")


def test_a_request_value_that_is_not_json_names_its_field(tmp_path):
    with pytest.raises(CosmosPlanError, match=r"planner request field 'write_spec' is not JSON serializable: object"):
        artifact.save({"planner_request": {"epochs": 1, "write_spec": object()}, "x": 1}, tmp_path / "p.json")
    with pytest.raises(CosmosPlanError, match="evaluation input results_dir must be a string, got int"):
        from arena_tao_cosmos_reason.evaluation import evaluation_plan

        evaluation_plan({"evaluation_contract": {"required_evaluation_intake": ["results_dir"], "generation": {}}},
                        {"results_dir": 5})


def test_request_validation_lists_every_bad_field():
    stderr = _fails_cleanly(["resolve", "--set", "epochs=abc", "--set", "nodes=0"], "epochs:", "nodes:")
    assert stderr.startswith("ERROR: invalid planner request: ")


DOCKER = dict(platform="docker", sqsh_path="", container_mount=[])
"""Absent absolute paths on SLURM mean "inspect on the login host"; on Docker they are input errors."""


@pytest.mark.parametrize("overrides,field", [
    (dict(backend="pytorch"), "'pytorch'"),
    (dict(timeout="03:99:00"), "timeout='03:99:00'"),
    (dict(timeout="soon"), "timeout='soon'"),
    (dict(model="llama"), "model must name"),
    (dict(run_mode="full", train_sample_limit=4), "train_sample_limit=4"),
    (dict(run_mode="diagnostic", validation_sample_limit=2), "validation_sample_limit=2"),
    (dict(training_mode="dense", lora_rank=16), "lora_rank=16"),
    (dict(training_mode="peft", lora_rank=8, lora_alpha=16), "lora_target_modules=[]"),
    (dict(container_mount=["/a"]), "(container_mount)"),
    (dict(sqsh_path="/x/image.tar", image_runtime_mode="existing-sqsh"), "sqsh_path='/x/image.tar'"),
    (dict(sqsh_path="", image_tag="oci://reg/repo:tag", sqsh_cache_dir="/tmp"), "image_tag='oci://reg/repo:tag'"),
    (dict(exclude_node=["bad node"]), "(exclude_node)"),
    (dict(rl_video_profile="fast", backend="cosmos-rl"), "rl_video_profile='fast'"),
    (dict(rl_dataset_cache_mode="disk", backend="cosmos-rl"), "rl_dataset_cache_mode"),
    (dict(base_model_path_or_uri="s3://bucket/model"), "(base_model_path_or_uri)"),
    (dict(DOCKER, validation_media_root=["/nowhere/media"]), "(validation_media_root)"),
    (dict(DOCKER, train_annotation=["/nowhere/train.json"]), "(train_annotation)"),
    (dict(DOCKER, prepared_checkpoint_path="/nowhere/prepared"), "prepared_checkpoint_path='/nowhere/prepared'"),
    (dict(backend="cosmos-framework", effective_global_batch=12), "effective_global_batch=12"),
    (dict(backend="cosmos-framework", framework_per_forward_batch=3), "framework_per_forward_batch=3"),
    (dict(backend="cosmos-framework", validation_batch_size=3), "validation_batch_size=3"),
    (dict(backend="cosmos-rl", rl_train_batch_per_replica=3, rl_mini_batch=2), "rl_mini_batch=2"),
])
def test_every_input_error_names_its_field(make_request, monkeypatch, overrides, field):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises((CosmosPlanError, ValueError)) as err:
        build_plan(make_request(**overrides))
    assert field in str(err.value), str(err.value)


def test_default_nano_plan_on_one_docker_gpu_says_which_batch_works(make_request):
    """The RL global-batch error names rl_train_batch_per_replica and a value; that value plans."""
    docker = dict(platform="docker", gpus_per_node=1, sqsh_path="", partition="", account="", container_mount=[])
    with pytest.raises(CosmosPlanError) as err:
        build_plan(make_request(**docker))
    message = str(err.value)
    assert "rl_train_batch_per_replica x total GPUs = 1 x 1 = 1 must equal effective_global_batch=8" in message
    assert "set rl_train_batch_per_replica=8" in message and "or effective_global_batch=1" in message
    assert build_plan(make_request(**docker, rl_train_batch_per_replica=8))["training"]["rl_batch"]["real_global_batch"] == 8
    assert build_plan(make_request(**docker, effective_global_batch=1))["backend"] == "cosmos-rl"
    with pytest.raises(CosmosPlanError, match=r"effective_global_batch to a multiple of the 3 GPUs \(e.g. 6 or 9\)"):
        build_plan(make_request(**dict(docker, gpus_per_node=3)))
    with pytest.raises(CosmosPlanError, match=r"set effective_global_batch to a multiple of 8 \(e.g. 8 or 16\)"):
        build_plan(make_request(backend="cosmos-framework", effective_global_batch=12))
    assert build_plan(make_request(backend="cosmos-framework", effective_global_batch=16))["training"]["steps_per_epoch"] == 1


def test_every_verb_prints_text(make_request, workspace, tmp_path, fake_bin):
    """``--format text`` prints the result's key facts for every verb (never nothing)."""
    fake_bin("ffprobe", "exit 0")
    root = workspace["root"]
    (root / "sqsh" / "image.sqsh").write_bytes(b"sqsh")
    request = root / "request.json"
    request.write_text(json.dumps(make_request(backend="cosmos-framework").model_dump()))
    plan = root / "plan.json"
    metadata = root / "meta.json"
    exit_file, status = root / "child_exit_code", EXAMPLES / "status_records.jsonl"
    exit_file.write_text("0\n")

    def text(*args):
        result = runner.invoke(app, [str(a) for a in args] + ["--format", "text"])
        assert result.exit_code in (0, 1), (args, result.stderr)
        assert result.stdout.strip(), args
        return result.stdout

    assert "backend: cosmos-rl" in text("resolve", "--model", "Cosmos3-Nano")
    assert "plan_artifact: " in text("plan", "--plan-artifact", plan, "--request", request)
    metadata.write_text(json.dumps(artifact.load(str(plan))["initial_metadata"]))
    assert "ok: True" in text("preflight", "--plan-artifact", plan)
    assert "config: " in text("materialize", "--plan-artifact", plan)
    assert "output: " in text("render-slurm", "--plan-artifact", plan, "--tao-job-id", "j1", "--render-output", root / "j1.sh")
    assert "ok: True" in text("validate-metadata", metadata)
    finalized = text("finalize-metadata", metadata, "--child-exit-file", exit_file, "--status-file", status,
                     "--scheduler-state", "COMPLETED", "--evaluator", EXAMPLES / "evaluator_result.json")
    assert "terminal_tao_status: SUCCESS" in finalized and "complete: True" in finalized
    metrics = text("extract-metrics", "--status-file", status, "--evaluator", EXAMPLES / "evaluator_result.json")
    assert "train_loss: 0.5 = 50 / 100 valid label tokens" in metrics
    assert "validation_loss: 0.1 = 10 / 100" in metrics and "accuracy: 0.9 = 90 / 100 examples" in metrics
    assert "ready: False" in text("evaluate", "--plan-artifact", plan, "--input", f"results_dir={root / 'eval'}")


def test_python_api_takes_paths(make_request, workspace, tmp_path):
    """``pathlib.Path`` works for request fields and every path argument; it is stored as ``str``."""
    root = workspace["root"]
    fields = make_request(backend="cosmos-framework").model_dump()
    for key in ("write_spec", "results_dir", "checkpoint_dir", "cache_dir", "base_model_path_or_uri", "ssh_key_path"):
        fields[key] = Path(fields[key])
    fields["train_annotation"] = [Path(p) for p in fields["train_annotation"]]
    fields["container_mount"] = tuple(fields["container_mount"])
    plan = root / "plan.json"
    sealed = verbs.plan(fields, plan)
    stored = json.loads(plan.read_text())["planner_request"]
    assert stored["write_spec"] == str(fields["write_spec"]) and stored["train_annotation"] == [str(workspace["train_ann"])]
    assert sealed["plan_artifact"]["path"] == str(plan)
    assert verbs.materialize_verb(plan)["ok"] is True
    out = verbs.render_slurm_verb(plan, "j1", root / "j1.sbatch")
    assert out["output"] == str(root / "j1.sbatch") and (root / "j1.sbatch").is_file()
    evaluated = verbs.evaluate(plan, {"results_dir": root / "eval", "checkpoint_selection": "final",
                                      "generation.max_tokens": "4", "metrics.names": "bleu"}, root / "eval.json")
    assert json.loads((root / "eval.json").read_text())["planner_request"]["evaluation_inputs"]["results_dir"] == str(root / "eval")
    assert evaluated["ready"] is True
    assert verbs.extract_metrics_verb(EXAMPLES / "status_records.jsonl", EXAMPLES / "evaluator_result.json", plan, True)
    assert PlanRequest(write_spec=Path("/x/t.toml")).write_spec == "/x/t.toml"
