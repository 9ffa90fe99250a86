"""A policy server that dies before it is ready fails its run with the line of its log that
states why (the exception type and message), not with the end of its last line: an unknown
LeRobot policy type used to read "…molVLAConfig'>, 'tdmpc': <class…", the name it could not
find cut off."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from arena.testing.experiments import run_in_child

pytestmark = pytest.mark.slow

REACH = {"type": "metaworld", "task": "reach-v3"}
#: What LeRobot's registry raises for an unknown policy type: the cause first, then every
#: registered type's class, far more than a reason can hold.
DIES = (  # no braces: a local_command's arguments are templates ({python}, {port})
    "import sys\n"
    "print('loading policy act_v9', flush=True)\n"
    "known = dict(('type%d' % i, \"<class 'lerobot.policies.type%d.configuration.Type%dConfig'>\" % (i, i))"
    " for i in range(40))\n"
    "raise ValueError(\"Unknown policy type 'act_v9'. Available: %r\" % (known,))\n"
)
CAUSE = "ValueError: Unknown policy type 'act_v9'. Available: {"


def test_a_server_that_raises_before_it_is_ready_fails_its_run_naming_the_exception(tmp_path):
    doc = {
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
        "runs": {"broken": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"},
                            "server": {"local_command": ["{python}", "-c", DIES], "readiness": "tcp",
                                       "startup_timeout_s": 60}}},
    }
    out = tmp_path / "out"
    run = run_in_child(doc, tmp_path / "exp.yaml", out, timeout_s=300)
    console = run.stdout + run.stderr
    assert run.returncode == 3, console
    error = json.loads((out / "experiment_result.json").read_text())["runs"]["broken"]["error"]
    assert "exited with code 1 before it was ready: " + CAUSE in error, error
    assert "File \"<string>\"" not in error  # the traceback's frames are not the cause
    assert CAUSE in console.replace("\n", "")
    assert CAUSE in json.loads((out / "broken" / "status.json").read_text())["error"]
    status = subprocess.run([sys.executable, "-m", "arena", "status", str(out)], capture_output=True, text=True,
                            timeout=120)
    assert CAUSE in status.stdout.replace("\n", ""), status.stdout + status.stderr


def test_the_cause_is_the_last_tracebacks_exception_line_else_an_error_line_else_the_last_lines(tmp_path):
    from arena.launch.server_process import log_cause

    log = tmp_path / "server.log"
    log.write_text("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nKeyError: 'x'\n\n"
                   "During handling of the above exception, another exception occurred:\n\n"
                   "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    load()\n"
                   "ValueError: unknown policy type 'act_v9'\nwith a second line\n[arena] stopping the policy server\n")
    assert log_cause(log) == "ValueError: unknown policy type 'act_v9'"
    log.write_text("loading\nerror: no checkpoint at /ckpt: download it first\nbye\n")
    assert log_cause(log) == "error: no checkpoint at /ckpt: download it first"
    log.write_text("one\ntwo\nOSError: [Errno 98] Address already in use\n")
    assert log_cause(log) == "OSError: [Errno 98] Address already in use"
    log.write_text("one\ntwo\nthree\nfour\n")
    assert log_cause(log) == "two | three | four"
    # an exception handled long before the end is not what the server died of
    log.write_text("Traceback (most recent call last):\n  File \"a.py\", line 1\nConnectionResetError: peer\n"
                   + "".join(f"served request {i}\n" for i in range(20)) + "Killed\n")
    assert log_cause(log) == "served request 18 | served request 19 | Killed"
    log.write_text("ValueError: unknown policy type 'act_v9': " + "x" * 1000 + "\n")
    cut = log_cause(log)
    assert cut.startswith("ValueError: unknown policy type 'act_v9'") and cut.endswith("…") and len(cut) == 400
    assert log_cause(tmp_path / "missing.log") == ""


def test_a_server_whose_program_is_not_on_path_fails_its_run_naming_the_program(tmp_path):
    """`arena.evaluate` (which has no CLI to refuse it beforehand) of a run whose server starts
    with a program that is not installed: the run ends `failed`, never `cancelled`, and the
    reason names the program in status.json, run_result.json, the result and the report."""
    import arena
    from arena.outputs.layout import REPORT_FILE

    doc = {
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
        "runs": {"served": {"environment": REACH, "policy": {"type": "metaworld_expert_remote"},
                            "server": {"local_command": ["no-such-vla-eval", "serve", "--port", "{port}"]}}},
    }
    out = tmp_path / "out"
    result = arena.evaluate(doc, output_dir=out, check=False)
    said = "`no-such-vla-eval` is not on PATH"
    assert result.exit_code == 3 and not result.ok
    run = result.runs["served"]
    assert run.state == "failed" and said in run.error, run
    status = json.loads((out / "served" / "status.json").read_text())
    assert status["state"] == "failed" and said in status["error"], status
    assert said in json.loads((out / "served" / "run_result.json").read_text())["error"]
    assert said in " ".join((out / REPORT_FILE).read_text().split())
    with pytest.raises(arena.errors.EvaluationFailed, match="no-such-vla-eval"):
        arena.evaluate(doc, output_dir=tmp_path / "again")
