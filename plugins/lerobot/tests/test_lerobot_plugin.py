"""The plugin's registrations, the ``lerobot`` venv's declaration and the server task, in arena's
own interpreter (no LeRobot needed)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arena.plugins import get_registry
from arena.venvs import declared_venvs, venv_python


def test_the_lerobot_venv_is_declared_by_the_servable_model_from_the_pinned_list():
    from arena_lerobot.model import LeRobotModel
    from arena_lerobot.venv import LOCK_FILE

    spec, users = declared_venvs()["lerobot"]
    assert "arena serve lerobot" in users
    assert spec is LeRobotModel.default_venv
    assert spec.python == "==3.12.*" and spec.accepts("3.12.1") and not spec.accepts("3.11.7")
    assert spec.distributions == ("arena-plugin-lerobot",)
    # the pins in one place: the resolved list, installed --no-deps (no resolver to add triton back)
    assert [step.args for step in spec.steps] == [("--no-deps", "-r", str(LOCK_FILE))]
    pins = dict(
        line.split("==") for line in LOCK_FILE.read_text().splitlines() if line and not line.startswith("#")
    )
    assert pins["lerobot"] == "0.6.1" and pins["torch"] == "2.11.0" and pins["metaworld"] == "3.0.0"
    assert not {"triton", "cuda-bindings", "cuda-pathfinder", "arena-core", "arena-plugin-lerobot"} & set(pins)
    assert get_registry().servers["lerobot"] is LeRobotModel


def test_lerobot_remote_server_task_runs_arena_serve_in_the_lerobot_venv(monkeypatch, tmp_path):
    from arena_lerobot.policy import LeRobotRemoteConfig

    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    config = LeRobotRemoteConfig(policy_path="/ckpt/pretrained_model", n_action_steps=7, seed=1)
    task = get_registry().server_tasks["lerobot_remote"](config)
    assert task.venv == "lerobot" and task.checkpoint == "/ckpt/pretrained_model"
    argv = task.render(task.local_command, host="127.0.0.1", port=8123, python=task.local_python())
    assert argv[:4] == [str(venv_python("lerobot")), "-m", "arena", "serve"]
    assert argv[4:] == [
        "lerobot", "--host", "127.0.0.1", "--port", "8123", "-o", "policy_path=/ckpt/pretrained_model",
        "-o", "device=auto", "-o", "n_action_steps=7", "-o", "seed=1",
    ]
    assert task.command[:3] == ["arena", "serve", "lerobot"]  # in a container image (Slurm/OSMO)
    assert "arena venv setup lerobot" in task.missing_venv()


def test_a_run_whose_lerobot_venv_is_missing_is_refused_naming_the_setup_command(monkeypatch, tmp_path):
    from arena.cli import app

    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "none"))
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        "runs:\n  act:\n    environment: {type: metaworld, task: reach-v3}\n"
        "    policy: {type: lerobot_remote, policy_path: /ckpt, embodiment: metaworld}\n"
        "    rollout_limit: {num_episodes: 1, max_episode_steps: 5}\n"
    )
    result = CliRunner().invoke(app, ["run", str(experiment), "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "venv 'lerobot', which does not exist" in text and "arena venv setup lerobot" in text
    assert "server.venv" in text and "act" in text


def test_lerobot_remote_config_refuses_a_bad_value():
    from pydantic import ValidationError

    from arena_lerobot.policy import LeRobotRemoteConfig

    with pytest.raises(ValidationError, match="policy_path"):
        LeRobotRemoteConfig()
    with pytest.raises(ValidationError, match="n_action_steps"):
        LeRobotRemoteConfig(policy_path="/x", n_action_steps=0)


def test_serve_lerobot_without_lerobot_says_where_to_run_it(tmp_path):
    """arena's own interpreter has no LeRobot: the model's load names the venv."""
    from arena.errors import ConfigError
    from arena_lerobot.model import LeRobotModel

    try:
        import lerobot  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("LeRobot is installed in this interpreter")
    with pytest.raises(ConfigError, match="arena venv setup lerobot"):
        LeRobotModel(policy_path=str(tmp_path)).load()
    with pytest.raises(ConfigError, match="policy_path"):
        LeRobotModel()


def test_lerobot_env_pusht_bounds_reach_the_run_and_return_intervals(tmp_path):
    """The bridge's pusht bounds (class method, no simulator) go through the manifest into
    run_result.json (``max_reward``: betting inside [0, 1]) and the sinks' ``returns`` (clipped at 0)."""
    import json
    from types import SimpleNamespace

    from arena.outputs.records import EpisodeRecord, RecordWriter, write_run_result
    from arena.rollout.workitems import write_manifest
    from arena.sinks import with_returns
    from arena_lerobot.bridge import LeRobotEnvConfig, LeRobotEnvironment

    pusht = LeRobotEnvConfig(env={"type": "pusht"})
    assert LeRobotEnvironment.episode_metric_bounds_for(pusht) == {"max_reward": (0.0, 1.0), "return": (0.0, None),
                                                                   "coverage": (0.0, 1.0)}
    assert LeRobotEnvironment.episode_metric_bounds_for(LeRobotEnvConfig(env={"type": "aloha"}))["max_reward"] == (0.0, 4.0)
    # the bridge reports what the env reports: PushT's coverage beside lerobot-eval's max_reward
    assert LeRobotEnvironment.episode_metrics_for(pusht) == {"max_reward": "max", "coverage": "max"}
    assert LeRobotEnvironment.episode_metrics_for(LeRobotEnvConfig(env={"type": "aloha"})) == {"max_reward": "max"}
    assert LeRobotEnvironment.episode_metric_bounds_for(LeRobotEnvConfig(env={"type": "metaworld"})) == {}
    run = SimpleNamespace(
        name="pusht", environment_type="lerobot_env", environment=pusht, environment_cls=LeRobotEnvironment,
        policy_type="zero", policy=SimpleNamespace(variant=lambda: None),
        environment_builder=SimpleNamespace(num_envs=1, seed=0), rollout_limit=SimpleNamespace(num_episodes=3),
    )
    manifest = json.loads(write_manifest(SimpleNamespace(name="exp", runs={"pusht": run}), tmp_path).read_text())
    bounds = manifest["runs"]["pusht"]["metric_bounds"]
    assert bounds == {"max_reward": [0.0, 1.0], "return": [0.0, None], "coverage": [0.0, 1.0]}
    assert manifest["runs"]["pusht"]["reported_as"]["by"] == "lerobot-eval"
    # few PushT episodes, small and skewed: Student's t went below 0 for both
    writer = RecordWriter(tmp_path / "pusht" / "episodes.jsonl")
    for i, (best, total) in enumerate(((0.02, 0.3), (0.0, 0.0), (0.61, 9.0))):
        writer.write(EpisodeRecord(run="pusht", episode_index=i, seed=i, outcome="timeout", steps=300,
                                   **{"return": total}, metrics={"max_reward": best}))
    writer.close()
    result = write_run_result(tmp_path / "pusht", run="pusht", state="completed", metric_bounds=bounds)
    reward = result["metrics"]["max_reward"]
    assert reward["method"] == "betting-bounded-mean" and 0.0 <= reward["ci_low"] < reward["ci_high"] <= 1.0
    returns = with_returns(result, tmp_path / "pusht")["returns"]
    assert returns["method"] == "student-t-clipped" and returns["ci_low"] == 0.0 < returns["ci_high"]


def test_reference_exact_serves_one_request_per_pass_on_pinned_threads():
    """``reference_exact: true``: ``--max-batch-size 1``, ``-o torch_threads=1`` and
    ``OMP_NUM_THREADS=1`` for the server; ``torch_threads`` picks another count; a batch size
    above 1 contradicts it."""
    from pydantic import ValidationError

    from arena_lerobot.policy import LeRobotRemoteConfig

    make = get_registry().server_tasks["lerobot_remote"]
    exact = make(LeRobotRemoteConfig(policy_path="/ckpt", reference_exact=True))
    assert exact.local_command[-2:] == ["--max-batch-size", "1"] and "torch_threads=1" in exact.local_command
    assert exact.env == {"OMP_NUM_THREADS": "1"}
    four = make(LeRobotRemoteConfig(policy_path="/ckpt", reference_exact=True, torch_threads=4))
    assert "torch_threads=4" in four.command and four.env == {"OMP_NUM_THREADS": "4"}
    plain = make(LeRobotRemoteConfig(policy_path="/ckpt"))
    assert "--max-batch-size" not in plain.local_command and not any("torch_threads" in a for a in plain.command)
    assert plain.env == {}
    with pytest.raises(ValidationError, match="max_batch_size 2 contradicts"):
        LeRobotRemoteConfig(policy_path="/ckpt", reference_exact=True, max_batch_size=2)
