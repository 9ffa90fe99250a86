"""``arena run`` of ``examples/vla_eval_metaworld.yaml`` on Meta-World: arena starts vla-eval's
real model server (``run_server`` with the dummy model; ready on ``GET /health``) next to its
openpi-protocol server, runs both on the same episodes and compares them paired (in the
report, and with ``arena compare OUT OUT --pair``). A third run,
whose model fails at step 4 (its second inference), shows an ERROR reply becoming ``error`` episodes, not failures."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml

from arena.testing.plugin_tests import OSMESA, arena_run, listed_plugin, run_arena

pytest.importorskip("vla_eval")

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "vla_eval_metaworld.yaml"
STEPS = 12


arena = functools.partial(run_arena, env=OSMESA, timeout=400)


@pytest.mark.slow
@pytest.mark.timeout(450)
def test_arena_run_starts_a_vla_eval_server_and_compares_it_with_an_openpi_server(tmp_path):
    from arena.results.run_summary import collect_run_records

    experiment = yaml.safe_load(EXAMPLE.read_text())
    experiment["shared"]["rollout_limit"] = {"num_episodes": 2, "max_episode_steps": STEPS}
    experiment["launch"]["local"]["jobs"] = 3
    failing = json.loads(json.dumps(experiment["runs"]["reach_vla_eval"]))
    failing["policy"]["server_args"] = {"chunk_size": 4, "fail_at_step": 4}
    experiment["runs"]["reach_vla_eval_failing"] = failing
    out = tmp_path / "out"
    result = arena_run(experiment, out, env=OSMESA, timeout=400)

    records = collect_run_records(out / "reach_vla_eval")
    assert [(r.outcome, r.steps, r.error) for r in records] == [("timeout", STEPS, None)] * 2
    for r in records:
        assert r.latency["requests"] == STEPS  # step-served: one request per step
        assert r.policy_extras == {"serving": "step", "vla_eval": {"model_server": "DummyModelServer", "image_format": "png"}}
        assert r.protocol["adapter"]["class"] == "arena_vla_eval.adapters:VlaEvalMetaWorldAdapter"

    failed = sorted(collect_run_records(out / "reach_vla_eval_failing"), key=lambda r: r.episode_index)
    assert failed and all(r.outcome == "error" and r.steps == 4 for r in failed)
    assert "observation_failed: RuntimeError: dummy model fails at step 4" in failed[0].error

    summary = json.loads((out / "experiment_result.json").read_text())
    pair = next(c for c in summary["comparisons"] if {c["a"], c["b"]} == {"reach_vla_eval", "reach_openpi"})
    assert pair["design"] == "paired" and pair["n_a"] == pair["n_b"] == 2
    run_result = json.loads((out / "reach_vla_eval" / "run_result.json").read_text())
    assert "DummyModelServer" in json.dumps(run_result)  # the HELLO, recorded as the server's metadata
    # the error episodes make that run partial (exit 3), never a failure count
    assert result.returncode == 3, result.stdout + result.stderr
    # the console's note gives the count with the reason (one cause, in env 0 and env 1)
    note = summary["runs"]["reach_vla_eval_failing"]["note"]
    assert note.startswith("2 episodes errored: PolicyError: env ") and "dummy model fails at step 4" in note, note
    assert "2 episodes errored: PolicyError" in result.stdout, result.stdout
    assert "reach_vla_eval" in result.stdout and "reach_openpi" in result.stdout
    # and with `arena compare`, the two policies of the one experiment
    compared = arena("compare", str(out), str(out), "--pair", "reach_vla_eval:reach_openpi", "--json")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    row = json.loads(compared.stdout)["runs"][0]
    assert row["run"] == "reach_vla_eval vs reach_openpi" and row["design"] == "paired"
    assert (row["policy_a"], row["policy_b"]) == ("vla_eval_remote", "metaworld_expert_remote")


def test_arena_plugins_lists_both_clients_and_their_server_tasks():
    vla_eval = listed_plugin("vla_eval")
    assert vla_eval["distribution"] == "arena-plugin-vla-eval"
    assert vla_eval["registered"]["policies"] == ["openvla_remote", "vla_eval_remote"]
    assert vla_eval["registered"]["server_tasks"] == ["openvla_remote", "vla_eval_remote"]
    assert vla_eval["registered"]["embodiment_adapters"] == [
        "openvla/libero", "openvla/oft_aloha", "openvla/oft_libero",
        "vla_eval/aloha", "vla_eval/libero", "vla_eval/metaworld",
    ]


def test_the_server_task_runs_vla_evals_script_or_serve_command_and_waits_for_health():
    from arena.errors import ConfigError

    from arena_vla_eval.policy import VlaEvalRemoteConfig
    from arena_vla_eval.servertask import vla_eval_server_task

    script = vla_eval_server_task(
        VlaEvalRemoteConfig(server_script="/opt/ve/model_servers/pi0.py", server_gpus=1,
                            server_args={"chunk_size": 10, "norm": {"a": 1}})
    )
    assert script.render(script.local_command, host="127.0.0.1", port=9000) == [
        "uv", "run", "/opt/ve/model_servers/pi0.py", "--address", "127.0.0.1:9000",
        "--args.chunk_size=10", '--args.norm={"a": 1}',
    ]
    assert script.readiness == "http:/health" and script.resources.gpu == 1 and script.api_key_args is None
    # server_config: tests/test_vla_eval_shipped_configs.py
    with pytest.raises(ConfigError, match="exactly one of"):
        vla_eval_server_task(VlaEvalRemoteConfig())


@pytest.mark.parametrize("backend", ["osmo", "slurm"])
def test_osmo_and_slurm_start_the_vla_eval_server_from_its_image_and_wait_for_health(tmp_path, backend):
    import re

    pytest.importorskip(f"arena_{backend}", reason=f"the {backend} backend is another distribution")
    overrides = ["runs.reach_vla_eval.policy.server_image=ghcr.io/example/vla-eval-dummy:1",
                 "runs.reach_openpi.server={image: ghcr.io/example/arena:1}"]
    result = arena("run", str(EXAMPLE), "--dry-run", "--backend", backend, "--output-dir", str(tmp_path / backend), *overrides)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = Path(re.search(r"are in (\S+)/", result.stdout).group(1))
    text = "\n".join(p.read_text() for p in folder.iterdir() if p.is_file())
    assert "arena_vla_eval.dummy" in text and "ghcr.io/example/vla-eval-dummy:1" in text
    assert "http:/health" in text
