"""`arena run FILE --backend ray --dry-run`: what would be submitted, with the server task's
resources as Ray resources, and the KubeRay RayJob manifest. Needs no Ray installed."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from arena.cli import app

ROOT = Path(__file__).resolve().parents[3]


def test_dry_run_prints_each_tasks_ray_resources_and_the_rayjob(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({
        "launch": {"backend": "ray", "ray": {"nodes": 3, "address": "auto"}},
        "shared": {"rollout_limit": {"num_episodes": 6}},
        "runs": {"reach": {
            "environment": {"type": "metaworld", "task": "reach-v3"},
            "policy": {"type": "metaworld_expert_remote"},
            "server": {"resources": {"cpu": 2, "gpu": 1, "memory": 8}},
        }},
    }))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["run", str(exp), "--dry-run", "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "# run reach: 3 x ray.remote(num_cpus=3.0, num_gpus=1, memory=8589934592, max_retries=0)" in text
    assert "node " in text and "--shard 0/3" in text and "(K = 0..2)" in text
    assert "serve metaworld-expert --host 127.0.0.1 --port" in text  # the server each task starts on its node
    manifest = yaml.safe_load(text[text.index("apiVersion: ray.io/v1"):])
    assert manifest["kind"] == "RayJob"
    spec = manifest["spec"]
    assert "launch.ray.address=auto" in spec["entrypoint"] and "launch.backend=ray" in spec["entrypoint"]
    [group] = spec["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == 3
    limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "3", "nvidia.com/gpu": "1", "memory": "8Gi"}
    assert not out.exists()



def test_dry_run_submits_one_task_per_server_group_and_node_and_counts_the_servers(tmp_path):
    exp = tmp_path / "exp.yaml"
    expert = {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "metaworld_expert_remote"}}
    exp.write_text(yaml.safe_dump({
        "launch": {"backend": "ray", "ray": {"nodes": 2, "address": "auto", "runners": 2}},
        "shared": {"rollout_limit": {"num_episodes": 6}},
        "runs": {"a": expert, "b": expert, "c": expert,
                 "zero": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}}},
    }))
    result = CliRunner().invoke(app, ["run", str(exp), "--dry-run", "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = result.output
    # the three expert runs: one group, 2 runners at once beside one server (1 CPU) per node
    assert "# server group of a, b, c: 2 x ray.remote(num_cpus=3.0, num_gpus=0," in text
    assert "# run zero: 2 x ray.remote(num_cpus=1.0, num_gpus=0, max_retries=0)" in text
    assert "ray/a.node.json --shard 0/2" in text and "ray/b.node.json" not in text
    assert "# policy servers started: 2 (2 per server group; 4 runs in 2 groups)" in text
    manifest = yaml.safe_load(text[text.index("apiVersion: ray.io/v1"):])
    assert manifest["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["maxReplicas"] == 4  # 2 groups x 2 nodes


def test_dry_run_and_node_spec_say_what_the_server_really_binds(tmp_path):
    # openpi's serve_policy.py takes no address: it binds 0.0.0.0 whatever arena asks, so the
    # dry run says it is exposed and the node spec records it (the run's provenance reads it)
    from arena.config import load_experiment
    from arena.launch.planning import plan_servers
    from arena_ray.options import RayOptions
    from arena_ray.render import node_spec

    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "libero_pi05.yaml"), "--backend", "ray", "--dry-run",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "binds 0.0.0.0: EXPOSED to the network" in result.output
    assert "# policy servers started: 1 (1 per server group; 40 runs in 1 group)" in result.output
    experiment = load_experiment(ROOT / "examples" / "libero_pi05.yaml")
    servers = plan_servers(experiment)
    run = next(iter(experiment.runs))
    info = node_spec(run, servers[run], RayOptions(), tmp_path).server.info
    assert info["bind"] == "0.0.0.0" and info["exposed"] is True
