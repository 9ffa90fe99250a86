"""What the container sees (spec §3.14, §7.12) and what the sealed request says (§0.2, §5.3).

A Docker plan mounts every host path its container reads (inputs read-only) and preflight checks
the mounts against the plan; a SLURM plan refuses an input no mount covers, naming the field;
and the sealed request is the resolved one, so planning it again reproduces what runs.
"""

import json
import tomllib

import pytest
from typer.testing import CliRunner

from arena_tao_cosmos_reason import artifact, verbs
from arena_tao_cosmos_reason.cli import app
from arena_tao_cosmos_reason.errors import CosmosPlanError
from arena_tao_cosmos_reason.planner import build_plan
from arena_tao_cosmos_reason.request import PlanRequest
from cosmos_fixtures import conversation_split, docker_mounts, exported, host_path_of, write_model

runner = CliRunner()


@pytest.fixture
def spread(tmp_path):
    """Model, data and run folders in three unrelated places, as on a real workstation."""
    model = write_model(tmp_path / "models" / "nano")
    train_ann, train_media = conversation_split(tmp_path / "datasets" / "doors", "train", n=8)
    val_ann, val_media = conversation_split(tmp_path / "datasets" / "doors", "val", n=8)
    run = tmp_path / "runs" / "r1"
    return {"root": tmp_path, "model": model, "train_ann": train_ann, "train_media": train_media,
            "val_ann": val_ann, "val_media": val_media, "run": run}


def _docker_request(spread, **overrides) -> dict:
    run = spread["run"]
    fields = dict(platform="docker", gpus_per_node=1, effective_global_batch=1, base_model_format="qwen3_vl",
                  base_model_path_or_uri=str(spread["model"]),
                  train_annotation=[str(spread["train_ann"])], train_media_root=[str(spread["train_media"])],
                  validation_annotation=[str(spread["val_ann"])], validation_media_root=[str(spread["val_media"])],
                  write_spec=str(run / "config" / "train.toml"), results_dir=str(run / "results"),
                  checkpoint_dir=str(run / "checkpoints"), cache_dir=str(run / "cache"), experiment_id="doors-1")
    fields.update(overrides)
    return fields


def _container_reads(plan: dict, script: str) -> dict[str, str]:
    """``what -> container path`` for every path the training step opens, from the spec and env."""
    with open(plan["planner_request"]["write_spec"], "rb") as fh:
        spec = tomllib.load(fh)
    env = exported(script)
    reads = {"spec": plan["config_container_path"]}
    if plan["backend"] == "cosmos-rl":
        reads.update(model=spec["policy"]["model_name_or_path"],
                     train_annotation=spec["custom"]["train_dataset"]["annotation_path"],
                     train_media=spec["custom"]["train_dataset"]["media_root"],
                     val_annotation=spec["custom"]["val_dataset"]["annotation_path"],
                     val_media=spec["custom"]["val_dataset"]["media_root"])
    else:
        reads.update(model=env["VLM_SAFETENSORS_PATH"], train_annotation=env["TAO_VIDEO_TRAIN_ANNOTATION"],
                     train_media=env["TAO_VIDEO_TRAIN_MEDIA"], val_annotation=env["TAO_VIDEO_VAL_ANNOTATION"],
                     val_media=env["TAO_VIDEO_VAL_MEDIA"])
    return reads


@pytest.mark.parametrize("backend", ["cosmos-rl", "cosmos-framework"])
def test_docker_plan_without_mounts_lets_the_container_read_model_and_data(spread, fake_bin, backend):
    """plan -> preflight -> render-docker: every path the spec and environment name reaches the
    right host file through a ``-v`` of the script, and the inputs are mounted read-only."""
    fake_bin("docker", 'echo "Docker version 27.0"')
    fake_bin("ffprobe", "exit 0")
    request = spread["root"] / "request.json"
    request.write_text(json.dumps(_docker_request(spread, backend=backend)))
    plan_path = str(spread["root"] / "plan.json")
    made = runner.invoke(app, ["plan", "--plan-artifact", plan_path, "--request", str(request)])
    assert made.exit_code == 0, made.stderr
    checked = runner.invoke(app, ["preflight", "--plan-artifact", plan_path])
    assert checked.exit_code == 0, checked.stdout
    script_path = spread["root"] / "submit.sh"
    rendered = runner.invoke(app, ["render-docker", "--plan-artifact", plan_path, "--tao-job-id", "doors-job-1",
                                   "--render-output", str(script_path)])
    assert rendered.exit_code == 0, rendered.stderr
    script = script_path.read_text()
    mounts = docker_mounts(script)
    plan = artifact.load(plan_path)
    expected = {"spec": plan["planner_request"]["write_spec"], "model": str(spread["model"]),
                "train_annotation": str(spread["train_ann"]), "train_media": str(spread["train_media"]),
                "val_annotation": str(spread["val_ann"]), "val_media": str(spread["val_media"])}
    for what, container_path in _container_reads(plan, script).items():
        assert host_path_of(container_path, mounts) == expected[what], (what, container_path, mounts)
    options = {source: opts for source, _, opts in mounts}
    for what in ("model", "train_annotation", "train_media", "val_annotation", "val_media"):
        assert options[expected[what]] == "ro", what
    for output in ("results", "checkpoints", "cache"):
        assert options[str(spread["run"] / output)] == ""
    assert plan["planner_request"]["container_mount"] == [f"{s}:{t}" + (f":{o}" if o else "") for s, t, o in mounts]


def test_preflight_fails_when_the_mounts_miss_a_path_the_plan_uses(spread, fake_bin):
    fake_bin("docker", 'echo "Docker version 27.0"')
    plan_path = spread["root"] / "plan.json"
    verbs.plan(_docker_request(spread), plan_path)
    plan = artifact.load(str(plan_path))
    plan["container_mounts"] = [m for m in plan["container_mounts"] if not m.startswith(str(spread["model"]))]
    artifact.save(plan, str(plan_path))
    result = runner.invoke(app, ["preflight", "--plan-artifact", str(plan_path)])
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    assert any("base_model_path_or_uri" in e and "not covered" in e for e in errors), errors


def test_preflight_reports_an_input_that_disappeared(spread, fake_bin):
    fake_bin("docker", 'echo "Docker version 27.0"')
    plan_path = spread["root"] / "plan.json"
    verbs.plan(_docker_request(spread), plan_path)
    spread["val_ann"].unlink()
    result = verbs.preflight(plan_path)
    assert result["ok"] is False
    assert any(e.startswith("validation_annotation is not readable") for e in result["errors"]), result["errors"]


def test_slurm_refuses_an_input_no_mount_covers_and_names_its_field(spread, tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    base = _docker_request(spread, platform="slurm", partition="p", account="a", sqsh_path=str(tmp_path / "i.sqsh"),
                           ssh_key_path=str(key))
    no_model = [f"{spread['run']}:/run", f"{spread['train_ann'].parent}:/data"]
    with pytest.raises(CosmosPlanError, match="not covered by a container mount: base_model_path_or_uri="):
        build_plan(PlanRequest(**base, container_mount=no_model))
    no_train_annotation = [f"{spread['run']}:/run", f"{spread['model']}:/model", f"{spread['train_media']}:/tm",
                           f"{spread['val_media']}:/vm", f"{spread['val_ann']}:/val.json"]
    with pytest.raises(CosmosPlanError, match="not covered by a container mount: train_annotation="):
        build_plan(PlanRequest(**base, container_mount=no_train_annotation))


def test_absolute_media_paths_are_seen_at_their_own_path(spread, tmp_path):
    """Annotations are not rewritten, so media named by absolute path must appear in the container
    at that path: Docker mounts its folder there read-only; SLURM refuses a mount that moves it."""
    elsewhere = tmp_path / "archive" / "clips"
    elsewhere.mkdir(parents=True)
    records = json.loads(spread["train_ann"].read_text())
    for i, record in enumerate(records[:3]):
        clip = elsewhere / f"abs_{i}.mp4"
        clip.write_bytes(f"absolute clip {i}".encode())
        record["video"] = str(clip)
    spread["train_ann"].write_text(json.dumps(records))
    docker = build_plan(PlanRequest(**_docker_request(spread)))
    assert f"{elsewhere}:{elsewhere}:ro" in docker["container_mounts"]
    key = tmp_path / "id"
    key.write_text("k")
    slurm = _docker_request(spread, platform="slurm", partition="p", account="a", sqsh_path=str(tmp_path / "i.sqsh"),
                            ssh_key_path=str(key), container_mount=[f"{tmp_path}:/ws"])
    with pytest.raises(CosmosPlanError, match="references media by absolute path .* mount it at the same path"):
        build_plan(PlanRequest(**slurm))
    same = dict(slurm, container_mount=[f"{tmp_path}:/ws", f"{elsewhere}:{elsewhere}"])
    assert build_plan(PlanRequest(**same))["datasets"]["train"]["absolute_media_dirs"] == [str(elsewhere)]


def test_sealed_request_records_the_container_paths_the_plan_uses(spread, tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    fields = _docker_request(spread, platform="slurm", gpus_per_node=8, effective_global_batch=8, partition="p",
                             account="a", sqsh_path=str(tmp_path / "i.sqsh"), ssh_key_path=str(key),
                             container_mount=[f"{spread['run']}:/runtime", f"{tmp_path}:/ws"])
    path = tmp_path / "plan.json"
    verbs.plan(fields, path)
    plan = artifact.load(str(path))
    sealed = plan["planner_request"]
    assert {k: sealed[k] for k in ("container_spec_path", "container_results_dir", "container_checkpoint_dir",
                                   "container_cache_dir")} == {
        "container_spec_path": "/runtime/config/train.toml", "container_results_dir": "/runtime/results",
        "container_checkpoint_dir": "/runtime/checkpoints", "container_cache_dir": "/runtime/cache"}
    assert sealed["container_results_dir"] == plan["container_paths"]["results_dir"]
    assert sealed["stdout_path"] == plan["slurm_logs"]["stdout"] == f"{spread['run']}/results/slurm-%j.out"
    script = verbs.render_slurm_verb(path, "job-1")
    assert "export TAO_STATUS_FILE=/runtime/results/job-1/status.json" in script


@pytest.mark.parametrize("platform", ["docker", "slurm"])
def test_planning_the_sealed_request_again_reproduces_what_runs(spread, tmp_path, platform):
    key = tmp_path / "id"
    key.write_text("k")
    extra = {} if platform == "docker" else dict(partition="p", account="a", sqsh_path=str(tmp_path / "i.sqsh"),
                                                ssh_key_path=str(key), container_mount=[f"{tmp_path}:/ws"])
    path = tmp_path / "plan.json"
    verbs.plan(_docker_request(spread, platform=platform, **extra), path)
    first = artifact.load(str(path))
    again = build_plan(PlanRequest(**first["planner_request"]))
    for key_name in ("spec", "environment", "command", "container_paths", "container_mounts", "container_access",
                     "slurm_logs", "compute", "image"):
        assert again[key_name] == first[key_name], key_name
    assert again["_request"] == first["planner_request"]


def test_docker_refuses_a_container_default_mounted_from_another_folder(spread, tmp_path):
    """Re-planning a sealed Docker request with a new results_dir must not leave /results on the old one."""
    path = tmp_path / "plan.json"
    verbs.plan(_docker_request(spread), path)
    sealed = dict(artifact.load(str(path))["planner_request"], results_dir=str(tmp_path / "other-results"))
    with pytest.raises(CosmosPlanError, match=r"container path /results is mounted from another host folder than "
                                              r"results_dir=.*other-results"):
        build_plan(PlanRequest(**sealed))
