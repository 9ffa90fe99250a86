"""`arena run --dry-run` is a page a user reads: each run on a line, each server task once."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from arena.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_dry_run_lists_each_run_once_and_each_server_task_once(tmp_path):
    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "quickstart.yaml"), "--dry-run",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) < 40, result.output  # was ~1,500 with every resolved default printed
    assert sum(line.startswith("  run ") for line in lines) == 9
    assert sum(line.startswith("  server metaworld-expert for ") for line in lines) == 1
    assert "null" not in result.output
    assert "--list-overrides" in result.output
    assert not (tmp_path / "out").exists()


def _dry_run(example: str, tmp_path, **env: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(ROOT / "examples" / example), "--dry-run", "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "out").exists()
    return done.stdout, done.stderr


def test_a_libero_suite_dry_run_says_each_thing_once_on_short_lines(tmp_path):
    fake = tmp_path / "venvs" / "libero" / "bin" / "python"  # a dry-run never starts it
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    stdout, stderr = _dry_run("libero_pi05.yaml", tmp_path, ARENA_VENVS=str(tmp_path / "venvs"))
    lines = stdout.splitlines()
    assert len(lines) < 60, stdout  # was 89 lines, 17 KB
    # was ~900 characters; the temporary folder's own length (pytest's, deeper under xdist) not counted
    short = [line.replace(str(tmp_path), "TMP") for line in lines]
    assert max(map(len, short)) < 240, max(short, key=len)
    assert "  40 runs (spatial.0 … long.9): libero with pi0_remote, 50 episodes (each up to the environment's step limit)" in stdout
    assert "episode(s)" not in stdout and "env(s)" not in stdout
    for run in ("spatial.5", "object.4", "long.8"):  # each run once: its task line
        assert len(re.findall(rf"\b{re.escape(run)}\b", stdout)) == 1, run
    assert re.search(r"^    long\.4 +libero_10/LIVING_ROOM_SCENE5_put_the_white_mug", stdout, re.M)
    assert stdout.count("server openpi-pi05-libero for 40 runs (spatial.0 … long.9):") == 1
    assert stdout.count("EXPOSED to the network") == 1
    # Without the venv the dry-run stops at it, naming the runs as briefly.
    done = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(ROOT / "examples" / "libero_pi05.yaml"), "--dry-run",
         "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ARENA_VENVS": str(tmp_path / "no-venvs")},
    )
    assert done.returncode == 2, done.stderr
    assert "40 runs (spatial.0 … long.9): the environment runs in its own venv 'libero'" in done.stderr
    assert "spatial.2" not in done.stderr


def test_mixed_policies_dry_run_names_each_server_once_with_pasteable_commands(tmp_path):
    stdout, _ = _dry_run("mixed_policies.yaml", tmp_path)
    for server in ("openpi-pi05-droid", "gr00t-oxe-droid", "dreamzero-droid"):
        assert stdout.count(f"server {server} for ") == 1, server
    assert stdout.count("EXPOSED to the network") == 2  # openpi's and DreamZero's servers, once each
    commands = [line for line in stdout.splitlines() if line and not line.startswith(("#", " ", "experiment"))]
    dreamzero = next(c for c in commands if "dreamzero" in c)
    argv = shlex.split(dreamzero)  # what a shell makes of the pasted line
    assert argv[:2] == ["bash", "-c"] and argv[2].startswith("cd /workspace/dreamzero && exec python -m torch.distributed.run")
    runner = shlex.split(commands[-1])
    assert runner[:4] == [sys.executable, "-m", "arena", "run-one"] and runner[runner.index("--run") + 1] == "microwave_pi05"
    assert "# run microwave_pi05; then microwave_gr00t, microwave_dreamzero, each the same command with its own --run" in stdout


def test_run_lists_are_shortened_past_four_names():
    from arena.launch.wording import command, run_list, run_names

    assert run_names(["a", "b", "c", "d"]) == "a, b, c, d"
    assert run_names([f"r{i}" for i in range(40)]) == "40 runs (r0 … r39)"
    assert run_list(["a"]) == "run a" and run_list(["a", "b"]) == "runs a, b"
    assert command(["bash", "-c", "cd /w && exec x"]) == "bash -c 'cd /w && exec x'"


def test_a_message_every_run_repeats_is_folded_to_one_naming_the_runs():
    from arena.launch.wording import fold_by_run, some_runs

    pairs = [(f"s.{i}", f"no image; set runs.s.{i}.server.image=IMAGE") for i in range(40)]
    pairs += [("x", "no image; set runs.x.server.image=IMAGE"), (None, "launch.osmo.pool: not set"), ("s.0", pairs[0][1])]
    assert fold_by_run(pairs) == [
        ([f"s.{i}" for i in range(40)] + ["x"], "no image; set runs.<run>.server.image=IMAGE"),
        ([], "launch.osmo.pool: not set"),
    ]
    assert fold_by_run([("only", "set runs.only.server.image")]) == [(["only"], "set runs.only.server.image")]
    assert some_runs([f"s.{i}" for i in range(40)]) == "s.0, s.1, s.2 and 37 more" and some_runs(["a", "b"]) == "a, b"
