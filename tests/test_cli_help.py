"""`arena … --help` as a user reads it: conventional usage lines, no types on flags, and the
exit codes of every command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Renders the help of every command, plugin commands included, in a fresh process (loading
# plugin commands changes the process-wide app).
_RENDER_ALL = r"""
import json, typer
from typer.testing import CliRunner
from arena.cli import app
from arena.plugins import get_plugin_manager

get_plugin_manager().register_commands(app)
root = typer.main.get_command(app)

def paths(command, path):
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from paths(sub, [*path, name])

runner = CliRunner()
print(json.dumps({" ".join(p): runner.invoke(app, [*p, "--help"], terminal_width=100).output for p in paths(root, [])}))
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", _RENDER_ALL], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_flags_show_no_type_and_usage_lines_name_arguments_in_capitals(helps):
    assert {"", "run", "validate", "serve", "plugins", "plugins new"} <= set(helps)
    for path, text in helps.items():
        assert "<bool>" not in text, f"arena {path} --help"
        assert "<list[" not in text, f"arena {path} --help"  # a repeatable shows the type of one value
        usage = next(line for line in text.splitlines() if "Usage:" in line)
        assert "{" not in usage, usage
    usage = {path: next(line for line in text.splitlines() if "Usage:" in line).split("Usage:")[1].strip() for path, text in helps.items()}
    assert usage["validate"] == "arena validate [OPTIONS] EXPERIMENT [OVERRIDES]..."
    assert usage["run"] == "arena run [OPTIONS] [EXPERIMENT] [OVERRIDES]..."
    assert usage["probe"] == "arena probe [OPTIONS] KIND HOST PORT"


CORE_COMMANDS = ["validate", "run", "run-one", "status", "cancel", "collect", "report", "compare", "doctor", "serve", "probe", "plugins"]


@pytest.mark.parametrize("command", CORE_COMMANDS)
def test_every_command_says_its_exit_codes(helps, command):
    lines = [line.strip(" │") for line in helps[command].splitlines()]
    assert "Exit codes:" in lines, f"arena {command} --help does not document its exit codes:\n{helps[command]}"
    codes = lines[lines.index("Exit codes:") + 1:]
    assert codes[0].startswith("0 "), codes


@pytest.mark.parametrize(
    "args",
    [["status", "{d}"], ["cancel", "{d}"], ["collect", "{d}"], ["report", "{d}"], ["compare", "{d}", "{d}"],
     ["probe", "no-such-kind", "127.0.0.1", "1", "--timeout", "1"], ["serve", "no-such-model"]],
    ids=lambda a: a[0],
)
def test_a_usage_error_exits_2_as_documented(args, tmp_path):
    from typer.testing import CliRunner

    from arena.cli import app

    result = CliRunner().invoke(app, [a.format(d=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
