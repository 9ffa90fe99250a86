"""Evaluation is a job of its own (spec §8.3, §8.4): it inherits the training plan's model, data,
prompt and scoring, but has its own job identity and results folder, mounted and translated."""

import json

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.cli import app
from arena_tao_cosmos_reason.errors import CosmosPlanError
from cosmos_fixtures import docker_mounts, exported, host_path_of, slurm_mounts

runner = CliRunner()


def _cli(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (args, result.stdout, result.stderr)
    return result.stdout


def _train_then_evaluate(make_request, workspace, platform, eval_results, render):
    """plan -> materialize -> render the training job -> evaluate -> render the evaluation job."""
    root = workspace["root"]
    extra = (dict(platform="docker", gpus_per_node=1, effective_global_batch=1, sqsh_path="", partition="", account="",
                  ssh_key_path="", container_mount=[]) if platform == "docker" else {})
    request = root / "request.json"
    request.write_text(json.dumps(make_request(backend="cosmos-framework", **extra).model_dump()))
    plan = root / "plan.json"
    _cli("plan", "--plan-artifact", plan, "--request", request)
    _cli("materialize", "--plan-artifact", plan)
    training_script = _cli(render, "--plan-artifact", plan, "--tao-job-id", "train-7")
    eval_plan = root / "eval.json"
    evaluated = json.loads(_cli("evaluate", "--plan-artifact", plan, "--input", f"results_dir={eval_results}",
                                "--input", "checkpoint_selection=final", "--input", "generation.max_tokens=32",
                                "--input", "metrics.names=bleu", "--output", eval_plan))
    assert evaluated["ready"] is True
    eval_script = _cli(render, "--plan-artifact", eval_plan, "--tao-job-id", "eval-7")
    return artifact.load(str(plan)), training_script, eval_script


def _assert_own_identity(training_script, eval_script, container_results):
    train_env, env = exported(training_script), exported(eval_script)
    assert env["TAO_JOB_ID"] == env["TAO_API_JOB_ID"] == "eval-7"
    assert env["TAO_RESULTS_ROOT"] == env["TAO_API_RESULTS_DIR"] == container_results
    assert env["TAO_STATUS_FILE"] == f"{container_results}/eval-7/status.json"
    assert train_env["TAO_STATUS_FILE"] not in eval_script and "train-7" not in eval_script
    assert not any(name.startswith("TAO_VIDEO_TRAIN") for name in env)
    assert env["TAO_EVAL_MAX_TOKENS"] == "32" and env["TAO_EVAL_CHECKPOINT"] == "final"


def test_slurm_evaluation_writes_into_its_own_mounted_results(make_request, workspace):
    eval_results = workspace["root"] / "eval-results"
    plan, training_script, eval_script = _train_then_evaluate(make_request, workspace, "slurm", eval_results,
                                                              "render-slurm")
    _assert_own_identity(training_script, eval_script, "/ws/eval-results")
    assert host_path_of("/ws/eval-results", slurm_mounts(eval_script)) == str(eval_results)
    assert f"export TAO_CHILD_EXIT_FILE={eval_results}/eval-7/child_exit_code" in eval_script
    assert f"#SBATCH --output={eval_results}/slurm-%j.out" in eval_script
    assert exported(eval_script)["TAO_EVAL_CHECKPOINT_ROOT"] == plan["container_paths"]["checkpoint_dir"]


def test_docker_evaluation_mounts_its_results_folder(make_request, workspace, tmp_path):
    eval_results = tmp_path / "elsewhere" / "eval-results"
    plan, training_script, eval_script = _train_then_evaluate(make_request, workspace, "docker", eval_results,
                                                              "render-docker")
    _assert_own_identity(training_script, eval_script, str(eval_results))
    mounts = docker_mounts(eval_script)
    assert (str(eval_results), str(eval_results), "") in mounts
    assert host_path_of(str(eval_results), mounts) == str(eval_results)
    for model_or_data in (workspace["model"], workspace["val_ann"], workspace["val_media"]):
        assert host_path_of(str(model_or_data), mounts) == str(model_or_data)
    assert f"mkdir -p {eval_results}/eval-7" in eval_script


def test_evaluation_refuses_the_training_identity_and_results(make_request, workspace):
    root = workspace["root"]
    plan = root / "plan.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), plan)
    verbs.render_slurm_verb(plan, "train-7")
    with pytest.raises(CosmosPlanError, match="is the training job's results_dir"):
        verbs.evaluate(plan, {"results_dir": str(root / "run" / "results")}, None)
    with pytest.raises(CosmosPlanError, match="not covered by a container mount: results_dir=/elsewhere"):
        verbs.evaluate(plan, {"results_dir": "/elsewhere/eval"}, None)
    inputs = {"results_dir": str(root / "eval"), "checkpoint_selection": "final", "generation.max_tokens": "8",
              "metrics.names": "bleu"}
    verbs.evaluate(plan, inputs, root / "eval.json")
    with pytest.raises(CosmosPlanError, match="is the training job's identity"):
        verbs.render_slurm_verb(root / "eval.json", "train-7")
    not_ready = verbs.evaluate(plan, {"results_dir": str(root / "eval")}, root / "partial.json")
    assert not_ready["ok"] is False
    with pytest.raises(CosmosPlanError, match=r"evaluation plan is not ready; supply \['checkpoint_selection'"):
        verbs.render_slurm_verb(root / "partial.json", "eval-1")


def test_checkpoint_selection_path_is_translated_into_the_container(make_request, workspace):
    root = workspace["root"]
    plan = root / "plan.json"
    verbs.plan(make_request(backend="cosmos-framework").model_dump(), plan)
    epoch = root / "run" / "checkpoints" / "epoch_1"
    inputs = {"results_dir": str(root / "eval"), "checkpoint_selection": str(epoch), "generation.max_tokens": "8",
              "metrics.names": "bleu"}
    evaluated = verbs.evaluate(plan, inputs, None)
    env = evaluated["spec_bundle"]["execution"]["environment"]
    assert env["TAO_EVAL_CHECKPOINT"] == "/ws/run/checkpoints/epoch_1"
