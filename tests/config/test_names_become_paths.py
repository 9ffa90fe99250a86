"""Every name that becomes a path or enters a script is validated where it is read.

The examples of issue 17: an experiment named ``.`` or ``..`` (or a file named ``...yaml``)
wrote outside ``outputs/``; a file name holding a line break put a shell line into the
generated sbatch script.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from arena.config import load_experiment, load_experiment_dict
from arena.errors import ConfigError
from arena.launch.planning import plan_servers

RUN = {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "zero_action"}}


@pytest.mark.parametrize("name", [".", "..", "../elsewhere", "a/b", "-flag", "two\nlines", ""])
def test_experiment_names_that_are_not_one_safe_folder_name_are_refused(name):
    with pytest.raises(ConfigError, match="key name"):
        load_experiment_dict({"name": name, "runs": {"a": RUN}}, source="x.yaml")


@pytest.mark.parametrize("stem", ["..", ".", "exp\ntouch injected\n#"])
def test_a_file_name_that_cannot_name_the_experiment_is_refused_with_what_to_do(tmp_path, stem):
    path = tmp_path / f"{stem}.yaml"
    path.write_text(yaml.safe_dump({"runs": {"a": RUN}}))
    with pytest.raises(ConfigError, match="rename the file or set a top-level `name:`"):
        load_experiment(path)


@pytest.mark.parametrize("name", ["v1.2", "pi0_eval-2", "2026.01"])
def test_ordinary_names_still_work(name):
    assert load_experiment_dict({"name": name, "runs": {"a": RUN}}).name == name


def test_arena_validate_of_dot_dot_dot_yaml_exits_2_and_writes_nothing(tmp_path):
    (tmp_path / "...yaml").write_text(yaml.safe_dump({"runs": {"a": RUN}}))
    done = subprocess.run([sys.executable, "-m", "arena", "run", "...yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["...yaml"]  # no outputs/, nothing beside it


def test_an_output_directory_with_a_line_break_is_refused(tmp_path):
    from arena.launch.submit import run_experiment

    experiment = load_experiment_dict({"runs": {"a": RUN}}, source="x.yaml")
    with pytest.raises(ConfigError, match="control character"):
        run_experiment(experiment, output_dir=tmp_path / "out\necho injected")
    assert list(tmp_path.iterdir()) == []


def test_names_that_enter_scripts_from_a_policy_or_server_are_validated():
    remote = {"type": "metaworld_expert_remote"}
    with pytest.raises(ConfigError, match="api_key_env"):
        load_experiment_dict({"runs": {"a": {**RUN, "policy": {**remote, "api_key_env": "KEY; touch x"}}}})
    for server, needle in [({"secrets": ["HF_TOKEN\nX"]}, "secret"), ({"env": {"A B": "1"}}, "env key")]:
        exp = load_experiment_dict({"runs": {"a": {**RUN, "policy": remote, "server": server}}})
        with pytest.raises(ConfigError, match=needle):
            plan_servers(exp)


def test_server_task_names_are_file_and_script_safe():
    from pydantic import ValidationError

    from arena.servertask import ServerTask

    for bad in ("../x", "a b", "x\ny", ".hidden"):
        with pytest.raises(ValidationError):
            ServerTask(name=bad)
    assert ServerTask(name="openpi-pi05-droid").name == "openpi-pi05-droid"
