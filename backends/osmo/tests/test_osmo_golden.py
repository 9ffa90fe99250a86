"""Golden workflows: what `arena run … --backend osmo` submits, file for file.

Rewrite the golden files with ``ARENA_UPDATE_GOLDEN=1 pytest backends/osmo/tests``; review the
diff like code. Embedded run snapshots are stood in for (they hold every core default) and
checked by loading them back.
"""

from __future__ import annotations

import yaml
from osmo_testkit import (
    assert_golden,
    experiment,
    node_spec_of,
    normalized_text,
    osmo_options,
    render,
    run,
    snapshot_of,
)

from arena_osmo.spec import check_template_text, validate_workflow


def _tasks(wf):
    return {t["name"]: t for g in wf.spec["workflow"]["groups"] for t in g["tasks"]}


def test_single_remote_run_golden(fake_models):
    wfs = render(experiment({"pick_place_pi05": run("fake_openpi")}, name="single"))
    assert_golden("single_remote_run.yaml", normalized_text(wfs))
    (wf,) = wfs
    groups = wf.spec["workflow"]["groups"]
    assert [g["name"] for g in groups] == ["r0-pick-place-pi05"]  # no collector: each runner publishes
    assert [(t["name"], t["lead"]) for t in groups[0]["tasks"]] == [
        ("r0-pick-place-pi05-runner", True),
        ("r0-pick-place-pi05-server", False),
    ]
    runner = groups[0]["tasks"][0]
    assert runner["exitActions"] == {"COMPLETE": "0-3"}
    assert runner["checkpoint"] == [
        {"path": "{{output}}/pick_place_pi05", "url": "s3://arena-results/{{workflow_id}}/pick_place_pi05", "frequency": "5m"}
    ]
    script = runner["files"][1]["contents"]
    node = node_spec_of(runner)["server"]
    assert (node["task"]["readiness"], node["task"]["startup_timeout_s"], node["client_host"]) == ("websocket", 900, "$HOST")
    assert "HOST='{{host:r0-pick-place-pi05-server}}'" in script and node["port"] == 8000


def test_mixed_openpi_gr00t_cosmos_runs_golden(fake_models):
    exp = experiment(
        {"pi05": run("fake_openpi"), "gr00t": run("fake_gr00t"), "cosmos": run("fake_cosmos"), "zero": run("zero_action")},
        name="mixed",
    )
    wfs = render(exp)
    assert_golden("mixed_policies.yaml", normalized_text(wfs))
    (wf,) = wfs
    tasks = _tasks(wf)
    assert tasks["r0-pi05-server"]["image"] == "registry.example/openpi-server:1.0"
    assert tasks["r1-gr00t-server"]["image"] == "registry.example/gr00t-server:1.6"
    assert tasks["r2-cosmos-server"]["image"] == "registry.example/cosmos-server:1.0"
    assert "r3-zero-server" not in tasks
    resources = wf.spec["workflow"]["resources"]
    # Cosmos asks for an H100: only the dgx-h100 platform of the pool has one.
    assert resources[tasks["r2-cosmos-server"]["resource"]]["platform"] == "dgx-h100"
    assert resources[tasks["r0-pi05-server"]["resource"]]["platform"] == "ovx-l40s"
    assert "zmq-ping" in tasks["r1-gr00t-runner"]["files"][1]["contents"]  # the script says what it waits for
    assert node_spec_of(tasks["r1-gr00t-runner"])["server"]["task"]["readiness"] == "zmq-ping"
    assert node_spec_of(tasks["r2-cosmos-runner"])["server"]["task"]["readiness"] == "http:/healthz"
    # GR00T's server needs HF_TOKEN: it gets exactly that credential; no runner names one.
    assert tasks["r1-gr00t-server"]["credentials"] == {"hf": {"HF_TOKEN": "token"}}
    assert "credentials" not in tasks["r0-pi05-server"]
    assert not any("credentials" in t for name, t in tasks.items() if name.endswith("-runner"))
    assert [t["checkpoint"][0]["path"] for name, t in tasks.items() if name.endswith("-runner")] == [
        "{{output}}/pi05", "{{output}}/gr00t", "{{output}}/cosmos", "{{output}}/zero"
    ]


def test_local_policy_run_runs_alone_golden(fake_models):
    wfs = render(experiment({"zero": run("zero_action")}, name="local"))
    assert_golden("local_policy_run.yaml", normalized_text(wfs))
    group = wfs[0].spec["workflow"]["groups"][0]
    assert [t["name"] for t in group["tasks"]] == ["r0-zero-runner"]
    script = group["tasks"][0]["files"][1]["contents"]
    assert node_spec_of(group["tasks"][0])["server"] is None
    assert "OUT={{output}}\n" in script
    assert "exec arena node /tmp/arena/node.json\n" in script
    assert node_spec_of(group["tasks"][0])["snapshot"] == "experiment.yaml"  # beside the spec


def test_a_runner_image_without_arena_fails_the_run_with_the_fix_before_anything_starts(fake_models, tmp_path):
    import json
    import subprocess

    wfs = render(experiment({"zero": run("zero_action")}, name="local"))
    script = wfs[0].spec["workflow"]["groups"][0]["tasks"][0]["files"][1]["contents"]
    out = tmp_path / "output"  # what OSMO puts in place of {{output}}
    path = tmp_path / "run.sh"
    path.write_text(script.replace("{{output}}", str(out)))
    bare = {"PATH": "/usr/bin:/bin"}  # an image without arena
    ended = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=bare, timeout=30)
    assert ended.returncode == 127, ended.stderr
    status = json.loads((out / "zero" / "status.json").read_text())  # published with the run's records
    assert status["state"] == "failed" and status["run"] == "zero"
    assert "`arena` is not a command on the node" in status["error"] and "launch.osmo.runner_image" in status["error"]
    assert "docker/runner.Dockerfile" in ended.stderr

    # with arena on the PATH the check passes and the script runs `arena node` as before
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "arena").write_text('#!/bin/sh\necho "ran: $*"\n')
    (tmp_path / "bin" / "arena").chmod(0o755)
    found = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=30,
                           env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    assert found.returncode == 0 and found.stdout == "ran: node /tmp/arena/node.json\n", found


def test_experiment_over_the_task_limit_is_split_golden(fake_models):
    runs = {f"run{i}": run("fake_openpi") for i in range(3)} | {"zero": run("zero_action")}
    exp = experiment(runs, ["launch.osmo.max_tasks_per_workflow=5"], name="split")
    wfs = render(exp)
    assert_golden("split_experiment.yaml", normalized_text(wfs))
    assert [wf.name for wf in wfs] == ["arena-split-1", "arena-split-2"]
    assert [[t.run for t in wf.runs] for wf in wfs] == [["run0", "run1"], ["run2", "zero"]]
    for wf in wfs:
        count = sum(len(g["tasks"]) for g in wf.spec["workflow"]["groups"])
        assert count <= 5


def test_default_limit_splits_above_one_hundred_tasks(fake_models):
    runs = {f"r{i}": run("fake_openpi") for i in range(60)}  # 120 tasks
    wfs = render(experiment(runs, name="big"))
    assert len(wfs) == 2
    assert all(sum(len(g["tasks"]) for g in wf.spec["workflow"]["groups"]) <= 100 for wf in wfs)
    assert sum(len(wf.runs) for wf in wfs) == 60


def test_override_precedence_golden(fake_models):
    """File < command line for launch.osmo; run placement beats server-task placement beats the pool."""
    osmo = osmo_options(pool="gpu-pool", priority="LOW", placement={"cosmos-server": {"pool": "h100-pool"}})
    runs = {"a": run("fake_openpi"), "b": run("fake_cosmos"), "c": run("fake_cosmos")}
    exp = experiment(
        runs,
        [
            "launch.osmo.priority=HIGH",
            "launch.osmo.runner.platform=dgx-h100",
            "launch.osmo.placement.c={pool: gpu-pool, platform: dgx-h100}",
            "runs.a.policy.policy_config=pi0_droid",
        ],
        osmo=osmo,
        name="precedence",
    )
    wfs = render(exp)
    assert_golden("override_precedence.yaml", normalized_text(wfs))
    assert [(wf.pool, [t.run for t in wf.runs]) for wf in wfs] == [("gpu-pool", ["a", "c"]), ("h100-pool", ["b"])]
    assert all("--priority HIGH" in wf.header[-1] for wf in wfs)
    assert "--policy.config=pi0_droid" in _tasks(wfs[0])["r0-a-server"]["command"]


def test_runner_snapshot_round_trips(fake_models, tmp_path):
    from arena.config import load_experiment

    exp = experiment({"pi": run("fake_openpi", open_loop_horizon=4), "zero": run("zero_action")})
    (wf,) = render(exp)
    tasks = _tasks(wf)
    for name, task_name in (("pi", "r0-pi-runner"), ("zero", "r1-zero-runner")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(snapshot_of(tasks[task_name]))
        again = load_experiment(path, check_requires=False)
        assert list(again.runs) == [name]
        assert again.launch.backend == "local"
        assert again.launch.watchdog is not None and again.launch.watchdog.first_episode_grace_s >= 1800
        # unchanged: the endpoint of the server comes from the script's --server-host/--server-port
        assert again.runs[name].to_dict() == exp.runs[name].to_dict()


def test_experiment_watchdog_reaches_the_runner(fake_models):
    exp = experiment(
        {"zero": run("zero_action")}, watchdog={"stall_s": 120, "first_episode_grace_s": 5400, "max_restarts": 1}
    )
    (wf,) = render(exp)
    snap = yaml.safe_load(snapshot_of(_tasks(wf)["r0-zero-runner"]))
    assert snap["launch"]["watchdog"] == {"stall_s": 120.0, "first_episode_grace_s": 5400.0, "max_restarts": 1}


def test_every_golden_file_validates_against_the_spec_model():
    from osmo_testkit import GOLDEN

    files = sorted(GOLDEN.glob("*.yaml"))
    assert len(files) >= 5
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            validate_workflow(doc)
        check_template_text(path.read_text())


def test_installed_model_plugins_need_images_and_render_one_server_per_run():
    """With the real openpi, GR00T and Cosmos plugins (when installed): none publishes a server
    image, so all three runs are refused at once, each under its own server.image; with images
    named, each run gets its plugin's server."""
    import pytest

    from arena.errors import ConfigError
    from arena.plugins import get_registry

    names = ("pi0_remote", "gr00t_remote", "cosmos_remote")
    if not all(n in get_registry().server_tasks for n in names):
        pytest.skip("the openpi, GR00T and Cosmos plugins are not all installed")
    platforms = {"gpu-pool": {"h100": {"gpu_type": "H100", "gpus": 8, "gpu_memory_gb": 80, "memory_gb": 2048, "cpus": 224}}}
    runs = {n: {"environment": {"type": "franka_kitchen", "task": "microwave"}, "policy": {"type": n}} for n in names}
    with pytest.raises(ConfigError) as refused:
        render(experiment(runs, osmo=osmo_options(platforms=platforms)))
    text = str(refused.value)
    for n in names:
        assert f"run '{n}': key server.image" in text
    assert "publishes no server image" in text and "no public GR00T server image" in text
    named = [f"runs.{n}.server.image=registry.example/{n}:1" for n in names]
    (wf,) = render(experiment(runs, named, osmo=osmo_options(platforms=platforms)))
    groups = wf.spec["workflow"]["groups"]
    assert [[t["lead"] for t in g["tasks"]] for g in groups] == [[True, False]] * 3
    assert [g["tasks"][1]["image"] for g in groups] == [f"registry.example/{n}:1" for n in names]
    validate_workflow(wf.spec)
