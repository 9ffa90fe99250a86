"""The ``arena cosmos-reason`` command group: exit codes 0/1/2, JSON and text output, plugin wiring."""

import json

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason.cli import app

runner = CliRunner()


def test_plugin_registers_the_group_with_arena():
    import typer

    from arena_tao_cosmos_reason import plugin

    root = typer.Typer()
    plugin.arena_register_commands(root)
    assert [g.name for g in root.registered_groups] == ["cosmos-reason"]


def test_resolve_prints_sorted_json_and_text():
    result = runner.invoke(app, ["resolve", "--model", "Cosmos3-Edge"])
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["backend"] == "cosmos-framework" and payload["schema_version"] == 2
    text = runner.invoke(app, ["resolve", "--model", "Cosmos3-Nano", "--format", "text"])
    assert "backend: cosmos-rl" in text.stdout


@pytest.mark.parametrize("backend", ["cosmos-framework", "rl"])
def test_resolve_with_an_explicit_backend_says_the_request_selected_it(backend):
    """A named supported backend is reported with the reason the reference implementation's
    backend selection returns there, "backend explicitly selected by the request" (the rule
    "an explicit supported backend wins" decides; it is not the reason reported)."""
    result = runner.invoke(app, ["resolve", "--model", "Cosmos3-Nano", "--backend", backend])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["backend_selection_reason"] == "backend explicitly selected by the request"
    text = runner.invoke(app, ["resolve", "--model", "Cosmos3-Nano", "--backend", backend, "--format", "text"])
    assert "backend_selection_reason: backend explicitly selected by the request" in text.stdout


def test_validation_error_exits_2_with_error_prefix():
    result = runner.invoke(app, ["resolve", "--backend", "pytorch"])
    assert result.exit_code == 2
    assert "ERROR:" in result.stderr and "backend must be" in result.stderr


def test_cli_plan_render_and_failing_preflight(make_request, workspace, fake_bin):
    fake_bin("ffprobe", "exit 1")
    req_file = workspace["root"] / "request.json"
    req_file.write_text(json.dumps(make_request(backend="cosmos-framework").model_dump()))
    plan_path = str(workspace["root"] / "plan.json")
    made = runner.invoke(app, ["plan", "--plan-artifact", plan_path, "--request", str(req_file), "--set", "epochs=2"])
    assert made.exit_code == 0, made.stderr
    assert json.loads(made.stdout)["training"]["epochs"] == 2
    pre = runner.invoke(app, ["preflight", "--plan-artifact", plan_path])
    assert pre.exit_code == 1
    assert any("does not decode" in e for e in json.loads(pre.stdout)["errors"])
    out = workspace["root"] / "job.sbatch"
    rendered = runner.invoke(app, ["render-slurm", "--plan-artifact", plan_path, "--tao-job-id", "j1",
                                   "--render-output", str(out)])
    assert rendered.exit_code == 0, rendered.stderr
    assert json.loads(rendered.stdout)["output"] == str(out) and out.read_text().startswith("#!/usr/bin/env bash")
    missing = runner.invoke(app, ["render-slurm", "--plan-artifact", plan_path])
    assert missing.exit_code == 2 and "requires --tao-job-id" in missing.stderr


@pytest.mark.parametrize("sample", ["status_records.jsonl"])
def test_shipped_sample_status_records_extract(sample):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples"
    result = runner.invoke(app, ["extract-metrics", "--status-file", str(examples / sample),
                                 "--evaluator", str(examples / "evaluator_result.json")])
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["train_loss"]["average"] == pytest.approx(0.5)
    assert payload["validation_loss"]["average"] == pytest.approx(0.1)
    assert payload["accuracy"]["average_validation_accuracy"] == pytest.approx(0.9)
