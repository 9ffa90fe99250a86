"""``type: package.module:Class`` imports code only when the user allows it.

The example of issue 17: ``arena validate`` of a downloaded experiment imported (ran) any
module its ``policy.type`` named, and ``python -m arena`` picked modules up from the current
directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.config import load_experiment, load_experiment_dict, write_snapshot
from arena.envs.base import Environment, EnvironmentConfig
from arena.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "rollout"
ALLOW_IMPORTS_ENV = "ARENA_ALLOW_IMPORTS"

#: A module that leaves a marker file when it is imported (its code ran).
MARKER_MODULE = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from rollout_fakes import CounterEnv as Env
"""


@pytest.fixture(autouse=True)
def _no_ambient_opt_in(monkeypatch):
    monkeypatch.delenv(ALLOW_IMPORTS_ENV, raising=False)


@pytest.fixture
def module_dir(tmp_path):
    """A directory holding ``lab_envs.py``, which marks ``marker`` when imported."""
    directory = tmp_path / "code"
    directory.mkdir()
    marker = tmp_path / "lab_envs-was-imported"
    (directory / "lab_envs.py").write_text(MARKER_MODULE.format(marker=str(marker)))
    return directory, marker


def _experiment(env_type: str, **extra) -> dict:
    return {
        **extra,
        "runs": {
            "lab": {
                "environment": {"type": env_type},
                "policy": {"type": "zero_action"},
                "rollout_limit": {"num_episodes": 2},
            }
        },
    }


def _env(*paths: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_IMPORTS_ENV}
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _arena(*args, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_class_path_type_is_refused_without_opt_in_and_its_module_never_runs(module_dir, monkeypatch):
    directory, marker = module_dir
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(FAKES))
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(_experiment("lab_envs:Env"), source="exp.yaml")
    message = str(info.value)
    assert "run 'lab'" in message and "key environment.type" in message
    assert "--allow-import lab_envs" in message and f"{ALLOW_IMPORTS_ENV}=lab_envs" in message
    assert not marker.exists()


def test_allowing_the_module_imports_it(module_dir, monkeypatch):
    directory, marker = module_dir
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.delitem(sys.modules, "lab_envs", raising=False)
    experiment = load_experiment_dict(_experiment("lab_envs:Env"), allow_imports=["lab_envs"])
    assert marker.exists() and experiment.imports == ["lab_envs"]
    assert experiment.snapshot()["allow_imports"] == ["lab_envs"]


def test_an_allowed_module_that_does_not_import_is_named(monkeypatch):
    with pytest.raises(ConfigError, match="cannot import 'no_such_pkg.mod:Policy'"):
        load_experiment_dict(
            {"runs": {"a": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "no_such_pkg.mod:Policy"}}}},
            allow_imports=["no_such_pkg"],
        )


def test_an_experiment_file_cannot_allow_its_own_imports(module_dir, monkeypatch):
    directory, marker = module_dir
    monkeypatch.syspath_prepend(str(directory))
    with pytest.raises(ConfigError, match="honoured only in the snapshots arena runs"):
        load_experiment_dict(_experiment("lab_envs:Env", allow_imports=["lab_envs"]))
    assert not marker.exists()


def test_allow_list_entries_cover_submodules_only():
    from arena.config.imports import ImportPolicy

    policy = ImportPolicy(("my_lab",))
    assert policy.allows("my_lab") and policy.allows("my_lab.envs.kitchen")
    assert not policy.allows("my_lab_other") and not policy.allows("other")
    assert ImportPolicy(("*",)).allows("anything.at.all")
    assert ImportPolicy.gather(["a"], environ={ALLOW_IMPORTS_ENV: " b, ,c "}).allowed == ("a", "b", "c")


def test_arena_validate_asks_for_the_opt_in_and_runs_nothing(module_dir, tmp_path):
    directory, marker = module_dir
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(_experiment("lab_envs:Env")))
    refused = _arena("validate", exp, cwd=tmp_path, env=_env(directory, FAKES))
    assert refused.returncode == 2, refused.stderr
    assert "--allow-import lab_envs" in refused.stderr
    assert not marker.exists()

    allowed = _arena("validate", exp, "--allow-import", "lab_envs", cwd=tmp_path, env=_env(directory, FAKES))
    assert allowed.returncode == 0, allowed.stderr
    assert marker.exists()
    marker.unlink()
    by_env = _arena("validate", exp, cwd=tmp_path, env=_env(directory, FAKES, **{ALLOW_IMPORTS_ENV: "lab_envs"}))
    assert by_env.returncode == 0, by_env.stderr
    assert marker.exists()


def test_run_one_inherits_the_opt_in_through_the_snapshot(module_dir, tmp_path, monkeypatch):
    """A Slurm job or an OSMO task runs the snapshot without the flag or the variable."""
    directory, marker = module_dir
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.delitem(sys.modules, "lab_envs", raising=False)
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump(_experiment("lab_envs:Env")))
    out = tmp_path / "out"
    write_snapshot(load_experiment(exp, allow_imports=["lab_envs"]), out / "experiment.yaml")
    marker.unlink()
    done = _arena("run-one", out / "experiment.yaml", "--run", "lab", "--output-dir", out, cwd=tmp_path, env=_env(directory, FAKES))
    assert done.returncode == 0, done.stderr[-2000:]
    assert marker.exists()
    # only the modules the experiment imported are trusted, not everything
    snapshot = yaml.safe_load((out / "experiment.yaml").read_text())
    assert snapshot["allow_imports"] == ["lab_envs"]


def test_osmo_task_snapshots_carry_the_allow_list(module_dir, monkeypatch):
    pytest.importorskip("arena_osmo")
    from arena_osmo.render import single_run_experiment

    directory, _ = module_dir
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.syspath_prepend(str(FAKES))
    experiment = load_experiment_dict(_experiment("lab_envs:Env"), allow_imports=["lab_envs"])
    assert single_run_experiment(experiment, "lab").snapshot()["allow_imports"] == ["lab_envs"]


def test_python_m_arena_does_not_import_from_the_working_directory(tmp_path):
    marker = tmp_path / "shadow-was-imported"
    workdir = tmp_path / "work"
    workdir.mkdir()
    # a stray yaml.py in the directory a user runs arena from
    (workdir / "yaml.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    exp = workdir / "exp.yaml"
    exp.write_text("runs:\n  a: {environment: {type: metaworld, task: reach-v3}, policy: {type: zero_action}}\n")
    done = _arena("validate", exp, cwd=workdir, env=_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert not marker.exists()


def test_arena_s_own_modules_need_no_opt_in_and_are_not_recorded():
    experiment = load_experiment_dict({"runs": {"a": {
        "environment": {"type": "arena.testing.envs:ToyReachEnv"}, "policy": {"type": "zero_action"}}}})
    assert experiment.runs["a"].environment_cls.__name__ == "ToyReachEnv"
    assert experiment.imports == [] and "allow_imports" not in experiment.snapshot()


# -- code a registered environment's config names (e.g. Isaac Lab's env_cfg) --------------------


class _CfgEnvConfig(EnvironmentConfig):
    env_cfg: str | None = None

    def code_references(self) -> dict[str, str]:
        return {"env_cfg": self.env_cfg} if self.env_cfg else {}


class _CfgEnv(Environment):
    name = "cfg_env"
    Config = _CfgEnvConfig
    success_key = "success"


@pytest.fixture
def cfg_manager(with_environments):
    return with_environments(cfg_env=_CfgEnv)


def _cfg_experiment(reference: str) -> dict:
    return {
        "shared": {"policy": {"type": "fake_policy"}},
        "runs": {"lab": {"environment": {"type": "cfg_env", "env_cfg": reference}}},
    }


def test_a_code_reference_in_a_registered_environment_config_needs_the_same_opt_in(cfg_manager):
    with pytest.raises(ConfigError) as info:
        load_experiment_dict(_cfg_experiment("my_lab.tasks:ReachCfg"), source="exp.yaml", manager=cfg_manager)
    message = str(info.value)
    assert "run 'lab'" in message and "key environment.env_cfg" in message
    assert "--allow-import my_lab" in message

    allowed = load_experiment_dict(
        _cfg_experiment("my_lab.tasks:ReachCfg"), source="exp.yaml", manager=cfg_manager, allow_imports=["my_lab"]
    )
    assert allowed.imports == ["my_lab.tasks"]  # the snapshot carries the opt-in to run-one
    # arena's own modules need none
    own = load_experiment_dict(_cfg_experiment("arena.envs.base:Environment"), source="exp.yaml", manager=cfg_manager)
    assert own.imports == []
