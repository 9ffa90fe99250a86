"""`arena run|status|cancel|collect` with the OSMO backend against a fake `osmo` on PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from osmo_testkit import dry_run_files, node_spec_of, osmo_options, run, runner_output, task
from typer.testing import CliRunner

from arena.cli import app
from arena_osmo.spec import validate_workflow

cli = CliRunner()


def write_experiment(tmp_path: Path, osmo: dict | None = None, runs: dict | None = None) -> Path:
    data = {
        "launch": {"backend": "osmo", "osmo": osmo or osmo_options()},
        "shared": {"rollout_limit": {"num_episodes": 4}},
        "runs": runs or {"pi": run("fake_openpi"), "zero": run("zero_action")},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def submitted(tmp_path, fake_osmo, *args, osmo=None, runs=None) -> Path:
    out = tmp_path / "out"
    result = cli.invoke(app, ["run", str(write_experiment(tmp_path, osmo, runs)), "--output-dir", str(out), *args])
    assert result.exit_code == 0, result.output
    return out


def test_submit_calls_osmo_with_json_and_records_the_workflow(fake_models, fake_osmo, tmp_path):
    out = submitted(tmp_path, fake_osmo, "launch.osmo.pool=h100-pool", "launch.osmo.priority=LOW")
    (call,) = fake_osmo.calls
    assert call[:2] == ["workflow", "submit"]
    assert call[3:] == ["--pool", "h100-pool", "--priority", "LOW", "--format-type", "json"]
    spec_file = Path(call[2])
    assert spec_file == out / "osmo" / "arena-exp.yaml"
    validate_workflow(yaml.safe_load(spec_file.read_text()))
    sub = json.loads((out / "submission.json").read_text())
    assert sub["backend"] == "osmo"
    assert sub["ids"] == {"pi": {"0": "arena-exp-1"}, "zero": {"0": "arena-exp-1"}}
    (entry,) = sub["extra"]["workflows"]
    assert entry["runs"]["pi"] == {"runner": "r0-pi-runner", "server": "r0-pi-server", "url": "s3://arena-results/arena-exp-1/pi"}
    assert entry["runs"]["zero"]["url"] == "s3://arena-results/arena-exp-1/zero"
    assert (out / "experiment.yaml").exists() and (out / "manifest.json").exists()


def test_dry_run_prints_the_workflow_without_calling_osmo(fake_models, fake_osmo, tmp_path):
    path = write_experiment(tmp_path, osmo_options(runner_image=None, output_url=None))
    result = cli.invoke(app, ["run", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    # The workflow goes to a file the output names, never mixed with the summary on stdout:
    # `arena run ... --dry-run > wf.yaml` cannot be taken for a workflow file.
    assert "version: 2" not in result.output
    (workflow,) = dry_run_files(result.output).values()
    assert yaml.safe_load(workflow)["workflow"]["groups"]
    assert "<unset: launch.osmo.runner_image>" in workflow and "<unset: launch.osmo.output_url>" in workflow
    assert "launch.osmo.runner_image: not set" in result.output  # and the summary says what is missing
    assert "submit: osmo workflow submit /" in result.output
    assert fake_osmo.calls == []
    refused = cli.invoke(app, ["run", str(path), "--output-dir", str(tmp_path / "out")])
    assert refused.exit_code == 2
    assert "key launch.osmo.runner_image: not set" in refused.output and "key launch.osmo.output_url: not set" in refused.output
    assert not (tmp_path / "out").exists()
    assert fake_osmo.calls == []


def test_refused_placement_exits_2_before_anything_is_written(fake_models, fake_osmo, tmp_path):
    path = write_experiment(tmp_path, runs={"co": run("fake_cosmos")})
    result = cli.invoke(app, ["run", str(path), "--output-dir", str(tmp_path / "out"), "launch.osmo.placement.co.platform=ovx-l40s"])
    assert result.exit_code == 2
    assert "refusing to place policy server 'cosmos-server'" in result.output
    assert fake_osmo.calls == [] and not (tmp_path / "out").exists()


def test_missing_osmo_cli_is_reported(fake_models, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = cli.invoke(app, ["run", str(write_experiment(tmp_path)), "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert "`osmo` command is not on PATH" in result.output


def test_failed_second_submission_cancels_the_first(fake_models, fake_osmo, tmp_path):
    fake_osmo.state = {"fail": {"workflow submit": {"after": 1, "stderr": "quota exceeded", "code": 1}}}
    fake_osmo.save()
    path = write_experiment(tmp_path)
    result = cli.invoke(app, ["run", str(path), "--output-dir", str(tmp_path / "out"), "launch.osmo.max_tasks_per_workflow=2"])
    assert result.exit_code == 3
    assert "quota exceeded" in result.output and "cancelled the workflows already submitted (arena-exp-1)" in result.output
    assert fake_osmo.calls[-1][:3] == ["workflow", "cancel", "arena-exp-1"]


def test_status_maps_osmo_task_states(fake_models, fake_osmo, tmp_path):
    out = submitted(tmp_path, fake_osmo)
    fake_osmo.set_workflow(
        "arena-exp-1",
        "RUNNING",
        {
            "r0-pi": [task("r0-pi-runner", "RUNNING"), task("r0-pi-server", "INITIALIZING", lead=False)],
            "r1-zero": [task("r1-zero-runner", "COMPLETED", exit_code=3)],
            "collect": [task("collect-outputs", "WAITING")],
        },
    )
    from arena.launch.submit import submission_status

    states = submission_status(out)
    assert states["pi"]["state"] == "starting_server"
    assert states["pi"]["osmo"]["server_status"] == "INITIALIZING"
    assert states["zero"]["state"] == "failed" and "exited 3" in states["zero"]["error"]
    result = cli.invoke(app, ["status", str(out)])
    assert result.exit_code == 0 and "starting_server" in result.output
    assert fake_osmo.calls[-1] == ["workflow", "query", "arena-exp-1", "--format-type", "json"]


def test_cancel_cancels_every_workflow(fake_models, fake_osmo, tmp_path):
    out = submitted(tmp_path, fake_osmo, "launch.osmo.max_tasks_per_workflow=2")
    result = cli.invoke(app, ["cancel", str(out)])
    assert result.exit_code == 0, result.output
    call = fake_osmo.calls[-1]
    assert call[:4] == ["workflow", "cancel", "arena-exp-1", "arena-exp-2"]
    assert "--format-type" in call and "--message" in call


def _finished(fake_osmo, wid="arena-exp-1", pi_status="COMPLETED", pi_code=3, message=None):
    fake_osmo.set_workflow(
        wid,
        "COMPLETED" if pi_status == "COMPLETED" else "FAILED",
        {
            "r0-pi": [task("r0-pi-runner", pi_status, exit_code=pi_code, message=message),
                      task("r0-pi-server", "FAILED_CANCELED", lead=False)],
            "r1-zero": [task("r1-zero-runner", "COMPLETED", exit_code=0)],
        },
    )


def _publish(bucket: Path, wid: str = "arena-exp-1", pi: bool = True) -> None:
    """What the runners' checkpoints published: a failed run and a completed one."""
    if pi:
        runner_output(bucket / wid / "pi", None, ["success", "error"], "failed", "policy server stopped answering")
    runner_output(bucket / wid / "zero", None, ["failure"] * 4, "completed")


def test_collect_downloads_each_published_run_and_reports_the_failed_run(fake_models, fake_osmo, tmp_path):
    bucket = tmp_path / "bucket"
    out = submitted(tmp_path, fake_osmo, osmo=osmo_options(output_url=bucket.as_uri() + "/{{workflow_id}}"))
    _publish(bucket)
    _finished(fake_osmo)
    fake_osmo.load()
    fake_osmo.state["logs"] = {"r0-pi-server": "INFO serving pi05 on 0.0.0.0:8000"}
    fake_osmo.save()

    result = cli.invoke(app, ["collect", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "experiment_result.json").read_text())
    assert data["runs"]["pi"]["state"] == "failed"
    assert data["runs"]["pi"]["error"] == "policy server stopped answering"
    assert data["runs"]["zero"]["state"] == "completed" and data["runs"]["zero"]["n"] == 4
    assert (out / "pi" / "server.log").read_text().strip() == "INFO serving pi05 on 0.0.0.0:8000"
    assert data["runs"]["pi"]["server_log"] == "pi/server.log"
    assert ["workflow", "logs", "arena-exp-1", "--task", "r0-pi-server"] in fake_osmo.calls
    assert (out / "index.html").exists()


def test_collect_uses_osmo_data_download_for_other_urls(fake_models, fake_osmo, tmp_path):
    out = submitted(tmp_path, fake_osmo, osmo=osmo_options(output_url="swift://store/arena/{{workflow_id}}"))
    staged = tmp_path / "staged"
    _publish(staged)
    _finished(fake_osmo)
    fake_osmo.load()
    fake_osmo.state["data"] = {f"swift://store/arena/arena-exp-1/{run}": str(staged / "arena-exp-1" / run) for run in ("pi", "zero")}
    fake_osmo.save()

    result = cli.invoke(app, ["collect", str(out)])
    assert result.exit_code == 0, result.output
    assert any(c[:3] == ["data", "download", "swift://store/arena/arena-exp-1/zero"] for c in fake_osmo.calls)
    data = json.loads((out / "experiment_result.json").read_text())
    assert data["runs"]["zero"]["state"] == "completed"


def test_a_runner_that_never_started_costs_only_its_own_run(fake_models, fake_osmo, tmp_path):
    bucket = tmp_path / "bucket"
    out = submitted(tmp_path, fake_osmo, osmo=osmo_options(output_url=bucket.as_uri() + "/{{workflow_id}}"))
    _publish(bucket, pi=False)  # the pi runner never pulled its image: it published nothing
    _finished(fake_osmo, pi_status="FAILED_IMAGE_PULL", pi_code=None, message="image not found")
    result = cli.invoke(app, ["collect", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "experiment_result.json").read_text())
    assert data["runs"]["pi"]["state"] == "failed"
    assert "FAILED_IMAGE_PULL: image not found" in data["runs"]["pi"]["error"]
    assert "launch.osmo.runner_image" in data["runs"]["pi"]["error"]
    assert data["runs"]["zero"]["state"] == "completed" and data["runs"]["zero"]["n"] == 4


def test_wait_polls_at_the_configured_interval_then_collects(fake_models, fake_osmo, tmp_path, monkeypatch):
    import arena_osmo.backend as backend_mod

    url = (tmp_path / "bucket").as_uri() + "/{{workflow_id}}"
    sleeps: list[float] = []

    def fake_sleep(seconds):
        sleeps.append(seconds)
        _finished(fake_osmo)

    monkeypatch.setattr(backend_mod.OsmoBackend, "_sleep", staticmethod(fake_sleep))
    out_path = tmp_path / "out"
    fake_osmo.set_workflow("arena-exp-1", "RUNNING", {"r0-pi": [task("r0-pi-runner", "RUNNING")]})
    # the runners' records are published before the workflow "finishes"
    exp = write_experiment(tmp_path, osmo_options(output_url=url, poll_interval_s=7))
    _publish(tmp_path / "bucket")
    result = cli.invoke(app, ["run", str(exp), "--output-dir", str(out_path), "--wait"])
    assert sleeps == [7.0]
    assert result.exit_code == 3, result.output  # a run failed
    data = json.loads((out_path / "experiment_result.json").read_text())
    assert data["runs"]["pi"]["state"] == "failed" and data["runs"]["zero"]["state"] == "completed"


@pytest.mark.parametrize("status", ["FAILED_CANCELED"])
def test_cancelled_workflow_shows_cancelled_runs(fake_models, fake_osmo, tmp_path, status):
    out = submitted(tmp_path, fake_osmo)
    fake_osmo.set_workflow("arena-exp-1", status, {"r0-pi": [task("r0-pi-runner", status)]})
    from arena.launch.submit import submission_status

    states = submission_status(out)
    assert states["pi"]["state"] == "cancelled"
    assert states["zero"]["state"] == "cancelled"


ARENA_SERVER = {"server": {"image": "registry.example/arena:0.1"}}


def test_arenas_own_exposed_server_requires_a_key_from_a_credential_made_at_submit(fake_models, fake_osmo, tmp_path):
    runs = {"expert": {**run("metaworld_expert_remote"), **ARENA_SERVER}}
    out = submitted(tmp_path, fake_osmo, runs=runs)
    set_call = next(c for c in fake_osmo.calls if c[:2] == ["credential", "set"])
    name = set_call[2]
    assert name.startswith("arena-key-") and set_call[3:] == ["--type", "GENERIC", "--payload-file", "api_key=/dev/stdin"]
    key = fake_osmo.load()["credentials"][name]["api_key"]
    assert len(key) == 64  # came through standard input, never a command line
    for file in (p for p in out.rglob("*") if p.is_file()):
        assert key not in file.read_text(errors="replace"), f"the key leaked into {file}"
    spec = yaml.safe_load((out / "osmo" / "arena-exp.yaml").read_text())
    tasks = {t["name"]: t for g in spec["workflow"]["groups"] for t in g["tasks"]}
    server, runner = tasks["r0-expert-server"], tasks["r0-expert-runner"]
    assert server["command"][-4:] == ["--port", "8000", "--api-key-env", "ARENA_SERVER_API_KEY"]
    assert "0.0.0.0" in server["command"]
    assert server["credentials"][name] == {"ARENA_SERVER_API_KEY": "api_key"}
    assert runner["credentials"][name] == {"ARENA_SERVER_API_KEY": "api_key"}
    # run-one reads the key by this name (--server-api-key-env, the one runner invocation's flag)
    node = node_spec_of(runner)
    assert node["server_api_key_env"] == "ARENA_SERVER_API_KEY"
    assert node["server"]["api_key_env"] == "ARENA_SERVER_API_KEY"  # the readiness probe presents it
    assert "requires an API key generated for this run" in (out / "osmo" / "arena-exp.yaml").read_text()
    assert json.loads((out / "submission.json").read_text())["extra"]["key_credential"] == name
    provenance = json.loads((out / "provenance.json").read_text())["servers"]["expert"]
    assert provenance["exposed"] is True and provenance["key"] == "generated"

    result = cli.invoke(app, ["cancel", str(out)])
    assert result.exit_code == 0, result.output
    assert ["credential", "delete", name] in fake_osmo.calls
    assert name not in fake_osmo.load()["credentials"]


def test_a_third_party_server_on_osmo_is_said_to_be_exposed_without_authentication(fake_models, fake_osmo, tmp_path):
    result = cli.invoke(app, ["run", str(write_experiment(tmp_path)), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "openpi-server binds 0.0.0.0: EXPOSED to the network, WITHOUT authentication" in result.output
    assert not any(c[:2] == ["credential", "set"] for c in fake_osmo.calls)
