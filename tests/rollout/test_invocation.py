"""The one ``arena run-one`` invocation every backend renders (issue 24 item 2)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.rollout import invocation as inv
from arena.rollout.invocation import RunOneInvocation, ShellWord, resume_args


def test_argv_holds_every_argument_in_one_order():
    full = RunOneInvocation(
        "/o/experiment.yaml", "reach", "/o", shard=(1, 4), resume=True, keep_errors=True,
        server_host="node1", server_port=4242, server_api_key_env="ARENA_SERVER_API_KEY", allow_imports=("mypkg",),
    )
    assert full.argv("py") == [
        "py", "-m", "arena", "run-one", "/o/experiment.yaml", "--run", "reach", "--output-dir", "/o",
        "--shard", "1/4", "--resume", "--keep-errors",
        "--server-host", "node1", "--server-port", "4242", "--server-api-key-env", "ARENA_SERVER_API_KEY",
        "--allow-import", "mypkg",
    ]
    bare = RunOneInvocation("s.yaml", "r", "out")
    assert bare.args() == ["run-one", "s.yaml", "--run", "r", "--output-dir", "out"] and bare.environment() == {}
    assert RunOneInvocation("s", "r", "o", keep_errors=True).resume_args() == ["--keep-errors"]  # a supervised child
    assert resume_args() == ["--resume"] and resume_args(True) == ["--resume", "--keep-errors"]


def test_every_argument_it_renders_is_one_run_one_accepts(monkeypatch, tmp_path):
    """Parsed by the real `arena run-one` command: the flags' spelling has one owner."""
    seen = {}

    def fake_run_one(snapshot, run_name, output_dir, **kwargs):
        seen.update(snapshot=str(snapshot), run=run_name, output_dir=str(output_dir), **kwargs)
        return 0

    monkeypatch.setattr("arena.rollout.run_one.run_one", fake_run_one)
    for name in (inv.SERVER_HOST_ENV, inv.SERVER_PORT_ENV, inv.SERVER_API_KEY_ENV_ENV):
        monkeypatch.delenv(name, raising=False)
    invocation = RunOneInvocation(
        tmp_path / "experiment.yaml", "reach", tmp_path, shard=(2, 3), resume=True, keep_errors=True,
        server_host="h", server_port=9, server_api_key_env="KEY_NAME", allow_imports=("a", "b"),
    )
    result = CliRunner().invoke(app, invocation.args())
    assert result.exit_code == 0, result.output
    assert seen["snapshot"] == str(tmp_path / "experiment.yaml") and seen["run"] == "reach"
    assert (seen["shard"], seen["resume"], seen["keep_errors"]) == ((2, 3), True, True)
    assert (seen["server_host"], seen["server_port"], seen["server_api_key_env"]) == ("h", 9, "KEY_NAME")
    assert list(seen["allow_imports"]) == ["a", "b"]


def test_shell_quotes_every_value_but_the_shell_words(tmp_path):
    marker = tmp_path / "injected"
    run = f"a b'$(touch {marker})"
    line = RunOneInvocation("/tmp/s.yaml", run, ShellWord('"$OUT"'), server_port=ShellWord('"$PORT"')).shell("printf '%s\\n'")
    assert line.endswith('--output-dir "$OUT" --server-port "$PORT"')
    words = subprocess.run(
        ["bash", "-c", line], env={"OUT": "/out dir", "PORT": "8000", "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    assert words == ["run-one", "/tmp/s.yaml", "--run", run, "--output-dir", "/out dir", "--server-port", "8000"]
    assert not marker.exists()
    assert shlex.split(RunOneInvocation("s", "r", "o").shell()) == ["arena", "run-one", "s", "--run", "r", "--output-dir", "o"]


def test_the_environment_names_are_its_own():
    task = {"name": "openpi-server", "checkpoint": "gs://x", "revision": None, "image": "img:1"}
    env = RunOneInvocation(
        "s", "r", "o", server_info={"host": "h", "port": 1}, server_task=task, time_limit="launch.slurm.time=01:00:00",
        watchdog_child=True, env={"ARENA_SERVER_API_KEY": "k"},
    ).environment()
    assert json.loads(env["ARENA_SERVER_INFO"]) == {"host": "h", "port": 1}
    assert json.loads(env["ARENA_SERVER_TASK"]) == task
    assert env["ARENA_TIME_LIMIT"] == "launch.slurm.time=01:00:00" and env["ARENA_WATCHDOG_CHILD"] == "1"
    assert env["ARENA_SERVER_API_KEY"] == "k"


@pytest.mark.parametrize("text", [None, "", "{not json", "[1, 2]"])
def test_run_one_without_a_handed_server_task_records_none(monkeypatch, text):
    from arena.rollout.run_one import _server_task

    if text is None:
        monkeypatch.delenv(inv.SERVER_TASK_ENV, raising=False)
    else:
        monkeypatch.setenv(inv.SERVER_TASK_ENV, text)
    assert _server_task() is None
    monkeypatch.setenv(inv.SERVER_TASK_ENV, json.dumps({"name": "t", "checkpoint": "c"}))
    assert _server_task() == {"name": "t", "checkpoint": "c"}
