"""How ``workers`` / ``python`` and the class's declarations spread envs over worker processes."""

from __future__ import annotations

import sys

import pytest

from arena.envs.base import Environment, EnvironmentConfig
from arena.envs.workers import plan_workers
from arena.envs.workers import layout
from arena.venvs import VenvSpec


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
    success_key = "success"
    default_venv = VenvSpec(name="libero-test")


def _plan(cls, num_envs, **config):
    return plan_workers(cls, EnvironmentConfig(**config), num_envs)


def test_workers_zero_runs_in_process_and_n_splits_into_contiguous_slices():
    assert _plan(AnyEnv, 4).in_process
    plan = _plan(AnyEnv, 5, workers=2)
    assert plan.slices == ((0, 1, 2), (3, 4)) and plan.interpreter() == sys.executable
    assert plan.resolved().python == sys.executable and plan.resolved().slices == plan.slices
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


def test_a_declared_venv_plans_a_worker_whatever_the_disk_holds(tmp_path, monkeypatch):
    """The plan never asks the disk (validation on a login node and the run on a compute node
    plan alike); the venv's interpreter is looked up where the workers start, by its name."""
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path))
    plan = _plan(WithVenv, 2)
    assert plan.slices == ((0, 1),) and plan.python is None and plan.venv == "libero-test"
    # Not on this machine: the workers run under this interpreter (the simulator may be here).
    assert plan.resolved().python == sys.executable
    assert "the libero-test venv does not exist at" in plan.resolved().describe()
    python = tmp_path / "libero-test" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert _plan(WithVenv, 2) == plan  # the same plan once the venv exists ...
    assert plan.resolved().python == str(python)  # ... resolved to its interpreter here
    assert "does not exist" not in plan.resolved().describe()
    other = _plan(WithVenv, 2, python="/other/python")
    assert other.python == "/other/python" and other.venv is None and other.resolved() == other


def test_the_loader_keeps_the_plan_and_the_run_builds_from_it(tmp_path, monkeypatch):
    """``ResolvedRun.worker_plan`` is the one plan: a snapshot loaded elsewhere plans the same,
    and build_environment uses the plan it is given rather than planning again."""
    from arena.config import load_experiment, write_snapshot
    from arena.envs.workers import build_environment

    path = tmp_path / "exp.yaml"
    path.write_text(
        "runs:\n  r:\n    environment: {type: 'tests_envs_layout:WithVenv', workers: 0}\n"
        "    policy: {type: zero_action}\n    environment_builder: {num_envs: 3}\n"
    )
    sys.modules.setdefault("tests_envs_layout", sys.modules[__name__])
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "login-node"))
    exp = load_experiment(path, allow_imports=["tests_envs_layout"])
    plan = exp.runs["r"].worker_plan
    assert plan == layout.WorkerPlan(slices=((0, 1, 2),), python=None, venv="libero-test")
    write_snapshot(exp, tmp_path / "out" / "experiment.yaml")
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "compute-node"))
    (tmp_path / "compute-node" / "libero-test" / "bin").mkdir(parents=True)
    (tmp_path / "compute-node" / "libero-test" / "bin" / "python").write_text("")
    again = load_experiment(tmp_path / "out" / "experiment.yaml", trust_snapshot=True)
    assert again.runs["r"].worker_plan == plan
    with pytest.raises(ValueError, match="holds 3 envs, not num_envs = 2"):
        build_environment(WithVenv, again.runs["r"].environment, num_envs=2, plan=plan)


class BackendConfig(EnvironmentConfig):
    backend: str = "cpu"


class PerBackend(Environment):
    """ManiSkill-like: one env per process on the CPU backend, all in one on the GPU backend."""

    name = "per_backend"
    success_key = "success"
    Config = BackendConfig

    @classmethod
    def envs_per_worker_for(cls, config):
        return "all" if config.backend == "gpu" else "one"


def test_how_envs_spread_may_depend_on_the_config():
    assert plan_workers(PerBackend, BackendConfig(backend="cpu"), 3).slices == ((0,), (1,), (2,))
    assert plan_workers(PerBackend, BackendConfig(backend="gpu", workers=1), 3).slices == ((0, 1, 2),)
    with pytest.raises(ValueError, match="runs all its envs in one worker"):
        plan_workers(PerBackend, BackendConfig(backend="gpu", workers=3), 3)
    with pytest.raises(ValueError, match="one env per worker"):
        plan_workers(PerBackend, BackendConfig(backend="cpu", workers=2), 3)
    assert AnyEnv.envs_per_worker_for(EnvironmentConfig()) == "any"


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


def test_a_venv_declared_as_a_plain_name_is_refused_saying_how_to_declare_it():
    class OldStyle(Environment):
        name = "old_style"
        default_venv = "bench"

    with pytest.raises(ValueError, match="default_venv must be an arena.venvs.VenvSpec"):
        _plan(OldStyle, 2)


class ModeConfig(EnvironmentConfig):
    mode: str = "plain"


class VenvPerMode(Environment):
    name = "venv_per_mode"
    success_key = "success"
    default_venv = VenvSpec(name="plain-test")

    @classmethod
    def default_venv_for(cls, config):
        return {"plain": cls.default_venv, "named": "other-test", "spec": VenvSpec(name="spec-test"),
                "own": None, "bad": 3}[config.mode]


def test_the_venv_may_depend_on_the_config():
    """``default_venv_for``: a spec, another declaration's venv by name, or this interpreter;
    ``python`` still wins; anything else is refused naming the method."""
    for mode, venv in (("plain", "plain-test"), ("named", "other-test"), ("spec", "spec-test")):
        plan = plan_workers(VenvPerMode, ModeConfig(mode=mode), 2)
        assert (plan.venv, plan.slices) == (venv, ((0, 1),)), mode
    assert plan_workers(VenvPerMode, ModeConfig(mode="own"), 2).in_process
    assert plan_workers(VenvPerMode, ModeConfig(mode="named", python="/usr/bin/python3"), 2).venv is None
    with pytest.raises(ValueError, match="default_venv_for must return"):
        plan_workers(VenvPerMode, ModeConfig(mode="bad"), 2)
    assert WithVenv.default_venv_for(EnvironmentConfig()) is WithVenv.default_venv
