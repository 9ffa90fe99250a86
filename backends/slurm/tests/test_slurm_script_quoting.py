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


def test_a_readiness_path_cannot_run_a_command_in_the_job(tmp_path):
    """The readiness kind never enters a shell line: the script holds none of it, and the node
    supervisor probes in Python with the text as written (the spec is JSON)."""
    from arena_slurm.render import node_spec

    marker = tmp_path / "injected"
    readiness = f"http:/health$(touch${{IFS}}{marker})`touch${{IFS}}{marker}`\""
    script = _script(tmp_path, {"readiness": readiness})
    assert "touch" not in script
    exp = load_experiment_dict(
        {"launch": {"backend": "slurm"},
         "runs": {"reach": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"},
                            "server": {"readiness": readiness}}}},
        source="quoting.yaml",
    )
    spec = node_spec(exp, "reach", plan_servers(exp)["reach"], exp.launch.options("slurm"), tmp_path / "out")
    assert spec.server.task.readiness == readiness  # the text arrives as written
    for line in (spec.server.command, spec.launcher, spec.server.signal_command):
        assert "touch" not in line
    subprocess.run(["bash", "-n", "-c", spec.server.command], check=True, timeout=30)
    assert not marker.exists()


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
    built_quoted = {"job_name", "array", "shards", "arena", "line", "server.where", "server.nodelist", "layout_note",
                    "instance_env", "key_env", "lease_env",  # arena's constant names
                    "time_signal", "stop_grace", "server.restarts", "queue_lease_s"}  # numbers
    templates = Path(__file__).resolve().parents[1] / "src" / "arena_slurm" / "templates"
    for template in templates.glob("*.j2"):
        for expr in re.findall(r"{{\s*(.*?)\s*}}", template.read_text()):
            assert "|" in expr and expr.split("|")[-1] in ("q", "dq", "comment", "sbatch") or expr in built_quoted, (
                template.name, expr)
