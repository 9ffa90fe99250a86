"""`arena plugins new NAME`: a plugin package whose tests pass as generated."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.errors import ConfigError
from arena.scaffold import create_plugin, plugin_names


def test_generated_package_has_entry_point_policy_adapter_server_task_model_tests_readme(tmp_path):
    result = CliRunner().invoke(app, ["plugins", "new", "my-vla", "--dir", str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    root = tmp_path / "pkg"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert files == {
        "pyproject.toml", "README.md", "tests/test_my_vla_plugin.py",
        *(f"arena_my_vla/{m}.py" for m in ("__init__", "plugin", "policy", "adapter", "server_task", "model")),
    }
    pyproject = (root / "pyproject.toml").read_text()
    assert 'name = "arena-plugin-my-vla"' in pyproject
    assert '[project.entry-points.arena]\nmy-vla = "arena_my_vla.plugin"' in pyproject
    for path in root.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
        assert "$" not in path.read_text(), path  # every placeholder was filled


def test_bad_names_and_non_empty_directories_are_refused(tmp_path):
    for bad in ("My-VLA", "1x", "a b", "x--y", ""):
        with pytest.raises(ConfigError):
            plugin_names(bad)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        create_plugin("ok", tmp_path / "taken")
    result = CliRunner().invoke(app, ["plugins", "new", "Bad Name", "--dir", str(tmp_path / "x")])
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("kind", "modules"),
    [("environment", ("__init__", "plugin", "env")), ("local-policy", ("__init__", "plugin", "policy"))],
)
def test_each_kind_generates_its_package(tmp_path, kind, modules):
    result = CliRunner().invoke(app, ["plugins", "new", "my-thing", "--kind", kind, "--dir", str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    root = tmp_path / "pkg"
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert files == {"pyproject.toml", "README.md", "tests/test_my_thing_plugin.py", *(f"arena_my_thing/{m}.py" for m in modules)}
    for path in root.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
        assert "$" not in path.read_text(), path
    assert CliRunner().invoke(app, ["plugins", "new", "x", "--kind", "sink", "--dir", str(tmp_path / "y")]).exit_code == 2


@pytest.mark.slow
def test_generated_plugins_of_every_kind_install_and_their_tests_pass(tmp_path):
    # one install and one pytest run for the three kinds (remote policy, environment, local policy)
    created = [
        create_plugin("demo-vla", tmp_path / "arena-plugin-demo-vla"),
        create_plugin("demo-env", tmp_path / "arena-plugin-demo-env", kind="environment"),
        create_plugin("demo-local", tmp_path / "arena-plugin-demo-local", kind="local-policy"),
    ]
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
         "--target", str(site), *(str(c.root) for c in created)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(str(c.root / "tests") for c in created)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert "14 passed" in tests.stdout  # 7 remote policy, 4 environment, 3 local policy
