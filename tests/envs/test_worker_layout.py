"""How ``workers`` / ``python`` and the class's declarations spread envs over worker processes."""

from __future__ import annotations

import sys

import pytest

from arena.envs.base import Environment, EnvironmentConfig
from arena.envs.workers import plan_workers
from arena.envs.workers import layout


class AnyEnv(Environment):
    name = "any_env"
    success_key = "success"


class OnePerWorker(Environment):
    name = "aloha_like"
    envs_per_worker = "one"


class Vectorized(Environment):
    name = "isaac_like"
    success_key = "success"
    envs_per_worker = "all"


class WithVenv(Environment):
    name = "libero_like"
    default_venv = "libero-test"


def _plan(cls, num_envs, **config):
    return plan_workers(cls, EnvironmentConfig(**config), num_envs)


def test_workers_zero_runs_in_process_and_n_splits_into_contiguous_slices():
    assert _plan(AnyEnv, 4).in_process
    plan = _plan(AnyEnv, 5, workers=2)
    assert plan.slices == ((0, 1, 2), (3, 4)) and plan.python == sys.executable
    assert _plan(AnyEnv, 2, workers=8).slices == ((0,), (1,))


def test_auto_uses_usable_cores_capped_by_num_envs(monkeypatch):
    monkeypatch.setattr(layout, "usable_cores", lambda: 3)
    assert len(_plan(AnyEnv, 10, workers="auto").slices) == 3
    assert len(_plan(AnyEnv, 2, workers="auto").slices) == 2


def test_another_interpreter_implies_a_worker(tmp_path):
    plan = _plan(AnyEnv, 3, python="/opt/bench/bin/python")
    assert plan.slices == ((0, 1, 2),) and plan.python == "/opt/bench/bin/python"
    assert "1 worker (envs 0-2) under /opt/bench/bin/python" == plan.describe()


def test_one_env_per_worker_environments_get_num_envs_workers():
    assert _plan(OnePerWorker, 3).slices == ((0,), (1,), (2,))
    assert _plan(OnePerWorker, 3, workers="auto").slices == ((0,), (1,), (2,))
    assert _plan(OnePerWorker, 1).in_process
    with pytest.raises(ValueError, match="one env per worker process"):
        _plan(OnePerWorker, 4, workers=2)


def test_self_vectorizing_environments_run_in_one_worker():
    assert _plan(Vectorized, 8, workers="auto").slices == (tuple(range(8)),)
    assert _plan(Vectorized, 8, workers=1).slices == (tuple(range(8)),)
    assert _plan(Vectorized, 8).in_process
    with pytest.raises(ValueError, match="runs all its envs in one worker"):
        _plan(Vectorized, 8, workers=3)


def test_default_venv_is_used_only_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    assert _plan(WithVenv, 2).in_process
    python = tmp_path / "libero-test" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    plan = _plan(WithVenv, 2)
    assert plan.python == str(python) and plan.slices == ((0, 1),)
    assert _plan(WithVenv, 2, python="/other/python").python == "/other/python"


def test_impossible_split_is_a_config_error_naming_the_run_and_key(tmp_path):
    from arena.config import load_experiment
    from arena.errors import ConfigError

    path = tmp_path / "exp.yaml"
    path.write_text(
        "runs:\n  r:\n    environment: {type: 'tests_envs_layout:Vectorized', workers: 2}\n"
        "    policy: {type: zero_action}\n    environment_builder: {num_envs: 4}\n"
    )
    sys.modules.setdefault("tests_envs_layout", sys.modules[__name__])
    with pytest.raises(ConfigError) as err:
        load_experiment(path, allow_imports=["tests_envs_layout"])
    assert err.value.run == "r" and err.value.key == "environment.workers"
    assert "workers must be 0, 1 or auto" in str(err.value)
