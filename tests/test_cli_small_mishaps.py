"""What a new user ran into in a first hour of trying arena, each kept as a test: the command
line as typed, the outcome a user sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from arena.cli import app

ARENA = [sys.executable, "-m", "arena"]


def _experiment(tmp_path: Path, **policy) -> Path:
    run = {
        "environment": {"type": "metaworld", "task": "reach-v3"},
        "policy": policy or {"type": "zero_action"},
        "rollout_limit": {"num_episodes": 2, "max_episode_steps": 10},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"runs": {"a": run, "b": run}}))
    return path


def test_a_reader_that_stops_early_does_not_stop_the_experiment(tmp_path):
    """`arena run exp.yaml | head -1`: the runs complete and the exit code is the experiment's."""
    out = tmp_path / "out"
    proc = subprocess.Popen([*ARENA, "run", str(_experiment(tmp_path)), "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline()  # the first line, then the reader goes away
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    assert "BrokenPipeError" not in stderr
    for run in ("a", "b"):
        assert json.loads((out / run / "status.json").read_text())["state"] == "completed"


def test_an_output_dir_that_is_a_file_is_a_configuration_error(tmp_path):
    target = tmp_path / "notadir"
    target.write_text("mine")
    result = CliRunner().invoke(app, ["run", str(_experiment(tmp_path)), "--output-dir", str(target)])
    assert result.exit_code == 2, result.output
    assert "is a file, not a directory" in " ".join(result.output.split())
    assert target.read_text() == "mine"


def test_a_module_next_to_the_experiment_is_not_imported_and_the_error_says_how(tmp_path):
    (tmp_path / "mypol.py").write_text("raise SystemExit('imported')\n")
    exp = _experiment(tmp_path, type="mypol:OnesPolicy")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([*ARENA, "validate", str(exp), "--allow-import", "mypol"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "No module named 'mypol'" in message and "never imports from the working directory" in message
    assert "PYTHONPATH" in message


def test_the_new_plugin_hint_installs_the_test_extra(tmp_path):
    result = CliRunner().invoke(app, ["plugins", "new", "my-vla", "--dir", str(tmp_path / "pkg")])
    assert result.exit_code == 0, result.output
    assert f"pip install -e '{tmp_path / 'pkg'}[test]'" in result.output


def test_a_new_plugin_may_not_take_the_name_of_an_installed_one(tmp_path):
    result = CliRunner().invoke(app, ["plugins", "new", "openpi", "--dir", str(tmp_path / "pkg")])
    assert result.exit_code == 2
    assert "is taken" in result.output and "arena-plugin-openpi" in result.output
    assert not (tmp_path / "pkg").exists()


def test_validate_warns_when_a_benchmark_venv_the_runs_need_is_missing(tmp_path, monkeypatch):
    example = Path(__file__).resolve().parents[1] / "examples" / "libero_quick.yaml"
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "venvs"))
    result = CliRunner().invoke(app, ["validate", str(example)])
    assert result.exit_code == 0, result.output  # a warning: the simulator may be installed here
    text = " ".join(result.output.split())
    assert text.count("arena venv setup libero") == 1 and "every episode will fail" in text
    python = tmp_path / "venvs" / "libero" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    result = CliRunner().invoke(app, ["validate", str(example)])
    assert result.exit_code == 0 and "arena venv setup libero" not in result.output


def test_arena_version_prints_the_installed_arena_core():
    from arena import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"arena-core {__version__}"
    assert "<bool>" not in CliRunner().invoke(app, ["--help"]).output


def test_arena_node_given_json_text_says_spec_is_a_file_path():
    """`arena node '{"run": ...}'`: its help said "(JSON; $VARs expanded)", so a user passes the
    JSON itself; the error says SPEC is the path of a file instead of "No such file or directory"."""
    result = CliRunner().invoke(app, ["node", '{"run": "r", "output_dir": "/tmp/x"}'])
    assert result.exit_code == 2, result.output
    assert "SPEC is the path of the node spec file" in " ".join(result.output.split())
    help_text = " ".join(CliRunner().invoke(app, ["node", "--help"], terminal_width=200).output.split())
    assert "path of the node spec file (JSON)" in help_text
