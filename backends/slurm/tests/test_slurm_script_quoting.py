"""Nothing a user writes can end a line of, or run a command in, the generated sbatch script.

The example of issue 17: an experiment file whose name held a line break put a shell line
into the sbatch script. Names are validated where they are read (``tests/config``); here
every value that still reaches a script is shown to stay inert when bash runs the line.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from arena.config import load_experiment_dict
from arena.errors import ConfigError
from arena.launch.planning import plan_servers
from arena_slurm.render import render_run_script

REACH = {"type": "metaworld", "task": "reach-v3"}


def _script(tmp_path: Path, server: dict, out: Path | None = None, slurm: dict | None = None) -> str:
    exp = load_experiment_dict(
        {
            "launch": {"backend": "slurm", "slurm": slurm or {}},
            "runs": {"reach": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": server}},
        },
        source="quoting.yaml",
    )
    return render_run_script(exp, "reach", plan_servers(exp)["reach"], exp.launch.options("slurm"), out or tmp_path / "out")


def _run_lines(tmp_path: Path, lines: list[str]) -> str:
    """Run ``lines`` in bash with the script's helpers stubbed; returns what arena_end got."""
    stub = 'arena_end() { printf "%s" "$2" > end.txt; }\nSERVER_HOST=node1\nPORT=4242\nCANCELLED=0\n'
    (tmp_path / "lines.sh").write_text(stub + "\n".join(lines) + "\n")
    subprocess.run(["bash", "lines.sh"], cwd=tmp_path, check=True, capture_output=True, timeout=30)
    return (tmp_path / "end.txt").read_text()


def test_a_readiness_path_cannot_run_a_command_in_the_job(tmp_path):
    marker = tmp_path / "injected"
    readiness = f"http:/health$(touch${{IFS}}{marker})`touch${{IFS}}{marker}`\""
    script = _script(tmp_path, {"readiness": readiness})
    lines = script.splitlines()
    assignments = [ln for ln in lines if ln.startswith(("READINESS=", "SERVER_NAME=", "STARTUP_TIMEOUT_S="))]
    assert len(assignments) == 3
    start = lines.index(next(ln for ln in lines if ln.startswith("not_ready() {")))
    not_ready = lines[start : lines.index("}", start) + 1]
    said = _run_lines(tmp_path, [*assignments, *not_ready, 'arena_end 3 "$(not_ready)"'])
    assert not marker.exists()
    assert readiness in said  # the text arrives as written


def test_a_line_break_in_any_name_never_starts_a_line_of_the_script(tmp_path):
    # names are validated on load; a value that slips through a comment stays on its line
    from arena.launch.shell import in_double_quotes, one_line

    assert one_line("a\nrm -rf /") == "a?rm -rf /"
    assert in_double_quotes('x"; touch /tmp/y; "\n$HOME') == 'x\\"; touch /tmp/y; \\"?\\$HOME'


def test_env_keys_that_are_not_variable_names_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not an environment variable name"):
        _script(tmp_path, {"env": {"X=1; touch /tmp/pwned; Y": "2"}})


def test_slurm_names_that_would_start_another_sbatch_line_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="not a Slurm name"):
        _script(tmp_path, {}, slurm={"partition": "gpu\n#SBATCH --account=someone-else"})


def test_an_output_directory_with_a_space_cannot_break_the_output_directive(tmp_path):
    with pytest.raises(ConfigError, match="cannot be written into an #SBATCH line"):
        _script(tmp_path, {}, out=tmp_path / "my outputs")


def test_every_substitution_of_the_templates_is_quoted():
    """A guard against new unquoted values: every {{ }} names a filter or a value built quoted."""
    built_quoted = {"job_name", "array", "shards", "arena", "line", "item", "server.where", "server.nodelist",
                    "server.srun_flags|join(' ')", "server.command", "server.timeout", "runner.probe_flags|join(' ')",
                    "runner.srun_flags|join(' ')", "layout_note",
                    "server.client_host", "instance_env", "key_env", "server_step",  # arena's constant names
                    "time_signal", "stop_grace", "server.restarts",  # numbers
                    # the runner invocation's arguments, each word quoted by RunOneInvocation.shell
                    "run_one.base", "run_one.shard", "run_one.server",
                    "run_one.time_limit_env", "run_one.info_env", "run_one.task_env"}  # arena's constant names
    templates = Path(__file__).resolve().parents[1] / "src" / "arena_slurm" / "templates"
    for template in templates.glob("*.j2"):
        for expr in re.findall(r"{{\s*(.*?)\s*}}", template.read_text()):
            assert "|" in expr and expr.split("|")[-1] in ("q", "dq", "comment", "sbatch") or expr in built_quoted, (
                template.name, expr)
