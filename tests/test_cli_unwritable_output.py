"""An output that cannot be written: one line naming the path, exit 3, runs failed, records intact.

The example of issue 17: a full disk or a read-only output directory gave raw tracebacks
(exit 1) and left ``status.json`` at ``running``. A full disk is made real here with
``RLIMIT_FSIZE``: every write past the limit fails with EFBIG, as a full disk fails with
ENOSPC (Python ignores SIGXFSZ, so the write raises instead of killing the process).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.outputs.records import read_records

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "rollout"


def _experiment(path: Path, episodes: int = 20) -> Path:
    path.write_text(yaml.safe_dump({"runs": {"count": {
        "environment": {"type": "rollout_fakes:CounterEnv"},
        "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
        "environment_builder": {"num_envs": 2, "seed": 0},
        "rollout_limit": {"num_episodes": episodes},
    }}}))
    return path


def _arena(*args, cwd: Path, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]),
           "PYTHONDONTWRITEBYTECODE": "1", "ARENA_ALLOW_IMPORTS": "rollout_fakes"}
    return subprocess.run(
        [sys.executable, "-m", "arena", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300, preexec_fn=limit,
    )


def test_an_output_directory_that_cannot_be_created_is_one_line_and_exit_3(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the output directory should go\n")
    done = _arena("run", _experiment(tmp_path / "exp.yaml"), "--output-dir", blocker / "out", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    [line] = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert f"cannot write {blocker / 'out'}" in line and "Not a directory" in line


def test_a_full_disk_mid_run_fails_the_run_and_keeps_the_records_written(tmp_path):
    out = tmp_path / "out"
    exp = _experiment(tmp_path / "exp.yaml")
    done = _arena("run-one", exp, "--run", "count", "--output-dir", out, cwd=tmp_path, file_size_limit=4096)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    records_path = out / "count" / "episodes.jsonl"
    assert f"cannot write {records_path}: File too large" in done.stderr
    status = json.loads((out / "count" / "status.json").read_text())
    result = json.loads((out / "count" / "run_result.json").read_text())
    assert status["state"] == result["state"] == "failed"
    assert str(records_path) in result["error"]
    records, issues = read_records(records_path)
    assert issues == []  # no torn line: the record that did not fit was cut back
    assert 3 <= len(records) < 20 and len({r.episode_index for r in records}) == len(records)
    assert result["episodes"] == len(records)


@pytest.mark.slow
def test_arena_run_on_a_full_disk_marks_the_run_failed_and_says_which_file(tmp_path):
    out = tmp_path / "out"
    done = _arena("run", _experiment(tmp_path / "exp.yaml"), "--output-dir", out, cwd=tmp_path, file_size_limit=6000)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    # the report's first file that does not fit (experiment_result.json is written before index.html)
    assert re.search(rf"cannot write {re.escape(str(out))}/(experiment_result\.json|index\.html): File too large", done.stdout)
    assert "failed" in done.stdout  # the summary table still shows the run
    status = json.loads((out / "count" / "status.json").read_text())
    assert status["state"] == "failed" and "episodes.jsonl" in status["error"]
    records, issues = read_records(out / "count" / "episodes.jsonl")
    assert issues == [] and records
