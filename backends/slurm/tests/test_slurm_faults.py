"""What a cluster does to long evaluations, on the real one-node Slurm cluster (see conftest.py):
jobs killed and resumed, jobs that can never start, time limits, a policy server that dies,
memory requests. Episodes are short (zero-action or random policies, tens of steps).
"""

from __future__ import annotations

import json
import time

import pytest
from slurm_testkit import REACH, arena, outcomes, results, state_of, wait_for, write_experiment  # noqa: F401

pytestmark = pytest.mark.slow


def _status_lines(out) -> str:
    done = arena("status", out)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_job_that_can_never_start_says_why_and_wait_fails_its_run_naming_the_option(slurm_cluster, tmp_path):
    runs = {"greedy": {"environment": REACH, "policy": {"type": "zero_action"}}}
    path = write_experiment(tmp_path, "greedy", runs, cpus=64)  # the node has 8
    out = tmp_path / "out"
    submitted = arena("run", path, "--backend", "slurm", "--output-dir", out)
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: "PartitionConfig" in _status_lines(out), 60, "squeue never gave the pending reason", slurm_cluster)
    status = _status_lines(out)
    assert "pending" in status and "Slurm will never start job" in status
    assert "lower launch.slurm.cpus" in status.replace("\n", " ")
    assert arena("cancel", out).returncode == 0

    out = tmp_path / "waited"
    started = time.monotonic()
    waited = arena("run", path, "--backend", "slurm", "--wait", "--output-dir", out, timeout=240)
    assert waited.returncode == 3, waited.stdout[-3000:] + waited.stderr[-3000:]
    assert time.monotonic() - started < 200  # stopped waiting instead of forever
    run = results(out)["greedy"]
    assert run["state"] == "failed" and "PartitionConfig" in run["error"] and "launch.slurm.cpus" in run["error"]
