"""An environment declares how it reports success; a missing signal is never a silent 0 %.

The example of issue 17: a simulator that reports success under ``is_success`` (gym-aloha)
ran 0/3, ``completed``, exit 0, with no word about it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from rollout_fakes import CounterConfig, CounterEnv, RolloutTestPlugin
from typer.testing import CliRunner

from arena.config import load_experiment
from arena.envs.base import Environment
from arena.errors import ConfigError
from arena.hookspecs import hookimpl
from arena.launch.base import Submission
from arena.plugins import PluginManager
from arena.results.report import write_report
from arena.rollout.run_one import run_one


class IsSuccessEnv(CounterEnv):
    """CounterEnv whose simulator reports success as ``info["is_success"]`` (as gym-aloha does)."""

    name = "is_success_env"
    success_key = "is_success"

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        return obs, reward, terminated, truncated, {"is_success": info["success"]}


class MisdeclaredEnv(IsSuccessEnv):
    """Declares ``success`` but its simulator fills ``is_success``: an integration bug."""

    name = "misdeclared_env"
    success_key = "success"


class NoSignalEnv(IsSuccessEnv):
    """A simulator with no success signal at all."""

    name = "no_signal_env"
    success_key = None


class UndeclaredEnv(Environment):
    """Written against the old contract: says nothing about success."""

    name = "undeclared_env"
    Config = CounterConfig


class _Plugin:
    @hookimpl
    def arena_register_environments(self, register):
        for cls in (IsSuccessEnv, MisdeclaredEnv, NoSignalEnv, UndeclaredEnv):
            register(cls.name, cls)


@pytest.fixture
def manager():
    pm = PluginManager()
    pm.register(RolloutTestPlugin(), "rollout-test")
    pm.register(_Plugin(), "success-signal-test")
    return pm


def _write(path, env_type, episodes=3):
    data = {
        "runs": {
            "count": {
                "environment": {"type": env_type, "task": "count-up"},
                "policy": {"type": "coin_flip"},
                "environment_builder": {"num_envs": 1, "seed": 0},
                "rollout_limit": {"num_episodes": episodes},
            }
        }
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _run(tmp_path, manager, env_type):
    out = tmp_path / "out"
    code = run_one(_write(tmp_path / "experiment.yaml", env_type), "count", out, manager=manager)
    result = json.loads((out / "count" / "run_result.json").read_text())
    status = json.loads((out / "count" / "status.json").read_text())
    return code, out, result, status


def test_environment_without_success_declaration_is_refused_at_validation(tmp_path, manager):
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path / "exp.yaml", "undeclared_env"), manager=manager)
    message = str(info.value)
    assert "run 'count'" in message and "key environment.type" in message
    assert "success_key" in message and "UndeclaredEnv" in message


def test_declared_key_missing_from_info_fails_the_run_and_names_the_keys(tmp_path, manager):
    code, _, result, status = _run(tmp_path, manager, "misdeclared_env")
    assert code == 3
    assert result["state"] == status["state"] == "failed"
    assert "'success'" in result["error"] and "is_success" in result["error"]
    # never counted as the policy's failures: the episode that saw it is an infrastructure error
    assert result["counts"]["failure"] == result["counts"]["timeout"] == result["counts"]["success"] == 0
    assert result["success_rate"] is None


def test_success_reported_under_the_declared_key_is_counted(tmp_path, manager):
    code, _, result, _ = _run(tmp_path, manager, "is_success_env")
    assert code == 0 and result["state"] == "completed"
    assert result["counts"]["success"] > 0
    assert result["warnings"] == []


def test_environment_without_success_signal_warns_in_result_status_report_and_cli(tmp_path, manager):
    code, out, result, status = _run(tmp_path, manager, "no_signal_env")
    assert result["counts"]["success"] == 0
    for where in (result, status):
        assert len(where["warnings"]) == 1 and "no success signal" in where["warnings"][0]
    report = write_report(out).read_text()
    assert "no success signal" in report and 'id="warnings"' in report

    # `arena status` says it too
    (out / "experiment.yaml").write_text(_write(tmp_path / "x.yaml", "no_signal_env").read_text())
    Submission(backend="local", experiment="x", output_dir=str(out)).save()
    from arena.cli import app

    shown = CliRunner().invoke(app, ["status", str(out)])
    assert shown.exit_code == 0, shown.output
    assert "warning" in shown.output and "no success signal" in shown.output
    assert code == 0  # it ran; the caveat travels with the numbers


def test_read_success_checks_one_value_per_env():
    from arena.envs.base import read_success
    from arena.errors import SuccessSignalError

    fake = type("E", (), {"success_key": "is_success"})()
    assert read_success(fake, {"is_success": [1, 0]}, 2).tolist() == [True, False]
    with pytest.raises(SuccessSignalError, match="one per env"):
        read_success(fake, {"is_success": np.zeros(3)}, 2)
    assert read_success(type("N", (), {"success_key": None})(), {}, 2).tolist() == [False, False]


WORKER_ENVS = '''
from arena.testing.envs import ToyReachEnv


class IsSuccessToy(ToyReachEnv):
    name = "is_success_toy"
    success_key = "is_success"

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        return obs, reward, terminated, truncated, {"is_success": info["success"]}


class MisdeclaredToy(IsSuccessToy):
    name = "misdeclared_toy"
    success_key = "success"
'''


@pytest.mark.parametrize(("cls_name", "fails"), [("IsSuccessToy", False), ("MisdeclaredToy", True)])
def test_envs_in_worker_processes_report_success_under_the_declared_key(tmp_path, monkeypatch, cls_name, fails):
    """The same contract when the envs run in worker processes (environment.workers)."""
    import importlib
    import os
    import sys

    from arena.envs.workers import build_environment
    from arena.rollout.rollout import rollout
    from arena.rollout.workitems import WorkItem
    from arena.testing.envs import ToyReachConfig

    (tmp_path / "toy_success_envs.py").write_text(WORKER_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    cls = getattr(importlib.import_module("toy_success_envs"), cls_name)
    env = build_environment(cls, ToyReachConfig(workers=2, image_size=8, success_radius=2.0), num_envs=2)
    policy = _ZeroPolicy()
    records = []
    try:
        summary = rollout(env, policy, [WorkItem(run="r", episode_index=i, seed=i) for i in range(4)],
                          None, on_episode_end=records.append)
    finally:
        env.close()
        sys.modules.pop("toy_success_envs", None)
    if fails:
        assert summary.aborted and "'success'" in summary.error and "is_success" in summary.error
        assert {r.outcome for r in records} == {"error"}
    else:
        assert not summary.aborted and [r.outcome for r in records] == ["success"] * 4  # radius 2: at once


class _ZeroPolicy:
    """Zero actions of the toy env (it succeeds by itself with a wide radius)."""

    name = "zeros"

    def start(self, env):
        self.n = env.num_envs

    def set_task_description(self, text):
        return text

    def set_active(self, env_ids):
        pass

    def reset(self, env_ids=None, seeds=None):
        pass

    def get_action(self, env, observation):
        return np.zeros((self.n, 2), np.float32)

    def episode_info(self, env_id):
        return {}
