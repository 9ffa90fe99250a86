"""What OSMO does to long evaluations, and what arena makes of it (issue: cluster runs that survive
the cluster): a runner killed with exit 137, resume, prompts through OSMO's templating,
credentials per task, server images and storage, every missing setting at once.

The fake ``osmo`` renders submitted files as the service does; :func:`osmo_testkit.execute_task`
runs a task of a submitted workflow as a pod would (real ``arena run-one``, real MuJoCo), and
publishes its checkpoint directory when it ends or is killed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from osmo_testkit import (
    dry_run_files,
    dry_run_text,
    execute_task,
    experiment,
    osmo_options,
    render,
    run,
    submitted_spec,
    task,
    tasks_of,
)
from typer.testing import CliRunner

from arena.cli import app
from arena.errors import ConfigError
from arena_osmo.render import CARRIED_RECORDS

cli = CliRunner()
REACH = {"type": "metaworld", "task": "reach-v3"}


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _outcomes(out: Path, run_name: str) -> list[tuple]:
    from arena.results.run_summary import collect_run_records

    return [(r.episode_index, r.seed, r.outcome, r.steps, round(r.return_, 6)) for r in collect_run_records(out / run_name)]


def _results(out: Path) -> dict:
    return json.loads((out / "experiment_result.json").read_text())["runs"]


@pytest.mark.slow
def test_a_runner_killed_with_137_loses_nothing_else_and_resume_completes_it(fake_models, fake_osmo, tmp_path):
    bucket = tmp_path / "bucket"
    osmo = osmo_options(output_url=bucket.as_uri() + "/{{workflow_id}}", runner={"gpu": 0}, credentials={})
    doc = {
        "launch": {"backend": "osmo", "osmo": osmo},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 3}, "rollout_limit": {"num_episodes": 2, "max_episode_steps": 40}},
        "runs": {
            "long": {"environment": REACH, "policy": {"type": "random_action"},
                     "rollout_limit": {"num_episodes": 6, "max_episode_steps": 150}},
            "short": {"environment": REACH, "policy": {"type": "zero_action"}},
        },
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(path), "--output-dir", str(out)]).exit_code == 0

    # The pool runs both runners; the long one is OOM-killed after two finished episodes.
    assert execute_task(fake_osmo, "arena-exp-1", "r1-short-runner", tmp_path / "pod-short") == 0
    killed = execute_task(
        fake_osmo, "arena-exp-1", "r0-long-runner", tmp_path / "pod-long",
        kill_when=lambda root: _lines(root / "output" / "long" / "episodes.jsonl") >= 2,
    )
    assert killed == 137
    fake_osmo.set_workflow("arena-exp-1", "FAILED", {
        "r0-long": [task("r0-long-runner", "FAILED", exit_code=137)],
        "r1-short": [task("r1-short-runner", "COMPLETED", exit_code=0)],
    })
    status = cli.invoke(app, ["status", str(out)])
    assert "exit code 137 (SIGKILL: typically out of memory" in status.output, status.output

    collected = cli.invoke(app, ["collect", str(out)])
    assert collected.exit_code == 0, collected.output
    runs = _results(out)
    assert runs["short"]["state"] == "completed" and runs["short"]["n"] == 2  # its records were never at risk
    assert runs["long"]["state"] == "failed" and "exit code 137" in runs["long"]["error"]
    published = runs["long"]["episodes_recorded"]
    assert 2 <= published < 6  # what its checkpoint published is kept

    resumed = cli.invoke(app, ["run", "--resume", str(out)])
    assert resumed.exit_code == 0, resumed.output
    assert f"{6 - published} episode(s) of 1 run(s): long" in resumed.output
    spec = submitted_spec(fake_osmo, "arena-exp-2")
    tasks = tasks_of(spec)
    assert list(tasks) == ["r0-long-runner"]  # only the unfinished run
    runner = tasks["r0-long-runner"]
    assert any(f["path"] == CARRIED_RECORDS for f in runner["files"])
    script = next(f["contents"] for f in runner["files"] if f["path"].endswith("run.sh"))
    assert "--resume" in script

    assert execute_task(fake_osmo, "arena-exp-2", "r0-long-runner", tmp_path / "pod-long-2") == 0
    new_lines = _lines(tmp_path / "pod-long-2" / "output" / "long" / "episodes.jsonl")
    assert new_lines == 6  # the carried ones plus only the unfinished ones
    fake_osmo.set_workflow("arena-exp-2", "COMPLETED", {"r0-long": [task("r0-long-runner", "COMPLETED", exit_code=0)]})
    assert cli.invoke(app, ["collect", str(out)]).exit_code == 0
    runs = _results(out)
    assert runs["long"]["state"] == "completed" and runs["long"]["n"] == 6
    sub = json.loads((out / "submission.json").read_text())
    assert sub["ids"] == {"long": {"0": "arena-exp-2"}, "short": {"0": "arena-exp-1"}}

    from arena.rollout.run_one import run_one

    reference = tmp_path / "uninterrupted"  # the same snapshot, run once without interruption
    for name in ("long", "short"):
        assert run_one(out / "experiment.yaml", name, reference, watchdog=False) == 0
        assert _outcomes(out, name) == _outcomes(reference, name), name


def test_a_runner_image_without_arena_ends_the_run_failed_with_the_fix_and_collect_keeps_that_reason(
    fake_models, fake_osmo, tmp_path
):
    bucket = tmp_path / "bucket"
    osmo = osmo_options(output_url=bucket.as_uri() + "/{{workflow_id}}", runner={"gpu": 0}, credentials={})
    doc = {
        "launch": {"backend": "osmo", "osmo": osmo},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 2, "max_episode_steps": 40}},
        "runs": {"short": {"environment": REACH, "policy": {"type": "zero_action"}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(path), "--output-dir", str(out)]).exit_code == 0
    # the pod of an image built without arena: its PATH has no arena
    code = execute_task(fake_osmo, "arena-exp-1", "r0-short-runner", tmp_path / "pod", path="/usr/bin:/bin", timeout_s=30)
    assert code == 127, (tmp_path / "pod" / "task.log").read_text()
    fake_osmo.set_workflow("arena-exp-1", "FAILED", {"r0-short": [task("r0-short-runner", "FAILED", exit_code=127)]})
    collected = cli.invoke(app, ["collect", str(out)])
    assert collected.exit_code == 0, collected.output
    short = _results(out)["short"]
    assert short["state"] == "failed", short
    assert "`arena` is not a command on the node" in short["error"] and "launch.osmo.runner_image" in short["error"], short
    assert not (out / "short" / "episodes.jsonl").exists()  # nothing ran


PROMPT = 'put the {{ cup }} {% if full %}on{% endif %} the shelf {# not a comment #} "now": it\'s\nsecond: line'


def test_a_prompt_reaches_the_runner_verbatim_through_osmo_templating(fake_models, fake_osmo, tmp_path):
    from arena.config import load_experiment
    from osmo_testkit import _materialize

    doc = {
        "launch": {"backend": "osmo", "osmo": osmo_options(credentials={})},
        "runs": {"kitchen": {"environment": {"type": "franka_kitchen", "task": "microwave", "instruction": PROMPT},
                             "policy": {"type": "zero_action"}}},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli.invoke(app, ["run", str(path), "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output  # the fake service's Jinja rendering accepted it
    pod = _materialize(tasks_of(submitted_spec(fake_osmo, "arena-exp-1"))["r0-kitchen-runner"], "arena-exp-1", tmp_path / "pod")
    assert pod["name"] == "r0-kitchen-runner"
    loaded = load_experiment(tmp_path / "pod" / "tmp" / "arena" / "experiment.yaml", check_requires=False)
    assert loaded.runs["kitchen"].environment.instruction == PROMPT


def test_user_text_outside_the_snapshot_that_osmo_would_render_is_refused(fake_models):
    exp = experiment({"pi": {**run("fake_openpi"), "server": {"env": {"NOTE": "{# eaten #}"}}}})
    with pytest.raises(ConfigError, match="OSMO's Jinja rendering would change line"):
        render(exp)


def test_each_task_gets_only_the_credentials_it_names(fake_models):
    creds = {name: {"credential": name.lower(), "key": "value"} for name in ("HF_TOKEN", "PI_KEY", "WANDB_API_KEY", "UNUSED")}
    exp = experiment(
        {
            "pi": run("fake_openpi", api_key_env="PI_KEY"),
            "gr": run("fake_gr00t"),
            "logged": {**run("zero_action"), "credentials": ["WANDB_API_KEY"]},
        },
        osmo=osmo_options(credentials=creds),
    )
    (wf,) = render(exp)
    tasks = tasks_of(wf.spec)
    assert tasks["r0-pi-runner"]["credentials"] == {"pi_key": {"PI_KEY": "value"}}
    assert "credentials" not in tasks["r0-pi-server"]
    assert "credentials" not in tasks["r1-gr-runner"]
    assert tasks["r1-gr-server"]["credentials"] == {"hf_token": {"HF_TOKEN": "value"}}
    assert tasks["r2-logged-runner"]["credentials"] == {"wandb_api_key": {"WANDB_API_KEY": "value"}}
    assert "unused" not in wf.text()
    text = dry_run_text(exp)  # --dry-run says which task gets which, by name
    assert "r0-pi-runner gets credentials PI_KEY (pi_key/value)" in text
    assert "r1-gr-runner gets no credentials" in text
    assert "r1-gr-server gets credentials HF_TOKEN (hf_token/value)" in text
    assert "r2-logged-runner gets credentials WANDB_API_KEY (wandb_api_key/value)" in text


def test_server_tasks_request_storage_sized_by_the_task_and_overridable(fake_models):
    exp = experiment(
        {"pi": run("fake_openpi"), "un": run("fake_unpublished"), "big": run("fake_unpublished")},
        ["runs.un.server.image=registry.example/un:1", "runs.big.server.image=registry.example/un:1",
         "runs.big.server.resources.storage=300"],
    )
    (wf,) = render(exp)
    resources = wf.spec["workflow"]["resources"]
    storage = {name: resources[t["resource"]]["storage"] for name, t in tasks_of(wf.spec).items() if name.endswith("-server")}
    assert storage == {"r0-pi-server": "50Gi", "r1-un-server": "120Gi", "r2-big-server": "300Gi"}
    (wf,) = render(experiment({"pi": run("fake_openpi")}, ["launch.osmo.server_storage_gb=80"]))
    assert "storage: 80Gi" in wf.text()


def test_a_server_without_a_public_image_is_refused_naming_the_key_to_set(fake_models):
    exp = experiment({"un": run("fake_unpublished")})
    with pytest.raises(ConfigError) as refused:
        render(exp)
    assert "run 'un': key server.image: policy server 'unpublished-server' has no container image" in str(refused.value)
    assert "build one from the model's Dockerfile" in str(refused.value)
    text = dry_run_text(exp)
    (workflow,) = dry_run_files(text).values()
    assert "image: '<unset: runs.un.server.image>'" in workflow
    assert "#   runs.un.server.image: policy server 'unpublished-server' has no container image" in text
    (wf,) = render(experiment({"un": run("fake_unpublished")}, ["runs.un.server.image=registry.example/un:1"]))
    assert tasks_of(wf.spec)["r0-un-server"]["image"] == "registry.example/un:1"


def test_a_suites_dry_run_says_a_missing_server_image_and_bare_tasks_once_not_per_run(fake_models):
    text = dry_run_text(experiment({f"t{i}": run("fake_unpublished") for i in range(6)}))
    notes = [line for line in text.splitlines() if "has no container image" in line]
    assert notes == [
        "#   runs.<run>.server.image (run(s) t0, t1, t2 and 3 more): policy server 'unpublished-server' has no container "
        "image (no public image exists: build one from the model's Dockerfile); set runs.<run>.server.image=IMAGE, or "
        "shared.server.image for every run"
    ], notes
    assert "gets no credentials" not in text and "12 tasks (r0-t0-runner … r5-t5-server) get no credentials" in text
    assert "runner image cannot run" not in text  # metaworld needs no benchmark venv


def test_a_dry_run_names_the_runs_an_image_built_from_the_runner_dockerfile_cannot_run(fake_models):
    bridge = {"environment": {"type": "lerobot_env", "env": {"type": "pusht"}}, "policy": {"type": "zero_action"}}
    text = dry_run_text(experiment({"bridge": bridge, "zero": run("zero_action")}))
    notes = text[text.index("# runs the runner image cannot run"):].splitlines()
    assert notes[1].startswith("#   run bridge: an image built from docker/runner.Dockerfile has no venv 'lerobot'"), notes
    assert "zero" not in notes[1]


def test_dry_run_lists_every_missing_setting_at_once_and_blames_no_run(fake_models, fake_osmo, tmp_path):
    doc = {
        "launch": {"backend": "osmo"},
        "runs": {"gr": run("fake_gr00t", api_key_env="GR_KEY"), "zero": run("zero_action")},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    dry = cli.invoke(app, ["run", str(path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    notes = dry.output[dry.output.index("# missing settings"):]
    for key in ("launch.osmo.pool", "launch.osmo.runner_image", "launch.osmo.output_url",
                "launch.osmo.credentials.GR_KEY", "launch.osmo.credentials.HF_TOKEN"):
        assert f"#   {key}: not set" in notes, key
    assert "run '" not in notes.replace("the runner of run 'gr'", "").replace("(run 'gr')", "")
    refused = cli.invoke(app, ["run", str(path), "--output-dir", str(tmp_path / "out")])
    assert refused.exit_code == 2
    for key in ("launch.osmo.pool", "launch.osmo.runner_image", "launch.osmo.output_url", "launch.osmo.credentials.GR_KEY"):
        assert f"key {key}: not set" in refused.output, key
    assert "run 'gr': key launch" not in refused.output and fake_osmo.calls == []


def test_status_says_why_a_run_waits_and_names_the_option_of_a_timeout(fake_models, fake_osmo, tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"launch": {"backend": "osmo", "osmo": osmo_options()},
                                    "runs": {"a": run("zero_action"), "b": run("zero_action")}}))
    out = tmp_path / "out"
    assert cli.invoke(app, ["run", str(path), "--output-dir", str(out)]).exit_code == 0
    fake_osmo.set_workflow("arena-exp-1", "FAILED", {
        "r0-a": [task("r0-a-runner", "SCHEDULING")],
        "r1-b": [task("r1-b-runner", "FAILED_QUEUE_TIMEOUT")],
    })
    status = cli.invoke(app, ["status", str(out)])
    assert "a: waiting: OSMO SCHEDULING: waiting for a node with the requested resources" in status.output
    assert "launch.osmo.queue_timeout" in status.output
