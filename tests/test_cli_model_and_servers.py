"""What answered a run is part of its result; ignored ports and unreachable servers are said.

Examples of issue 17: a record named the policy type and where its server was, not the model;
a fixed ``policy.remote_port`` was silently ignored when arena started the server; an
unreachable external server gave "0/0 … 0–100 %" and a latency section claiming no run made
requests to a policy server.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow


def _arena(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def _experiment(path: Path, run: dict) -> Path:
    base = {
        "environment": {"type": "metaworld", "task": "reach-v3"},
        "environment_builder": {"num_envs": 1, "seed": 0},
        "rollout_limit": {"num_episodes": 1, "max_episode_steps": 15},
    }
    path.write_text(yaml.safe_dump({"runs": {"reach": {**base, **run}}}))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_results_name_the_model_and_compare_says_when_models_differ(tmp_path):
    runs = {}
    for revision in ("r1", "r2"):
        exp = _experiment(tmp_path / f"{revision}.yaml", {
            # remote_port is fixed although arena starts the server: it must say so
            "policy": {"type": "metaworld_expert_remote", "remote_port": 9999},
            "server": {"checkpoint": "experts/{model_name}", "revision": revision, "fields": {"model_name": "scripted"}},
        })
        out = tmp_path / revision
        done = _arena("run", exp, "--output-dir", out, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        runs[revision] = (out, done)

    out, done = runs["r1"]
    assert "policy.remote_port 9999 will not be used" in done.stderr and "external: true" in done.stderr
    result = json.loads((out / "reach" / "run_result.json").read_text())
    model = result["model"]
    assert model["checkpoint"] == "experts/scripted" and model["revision"] == "r1"
    assert model["server_task"] == "metaworld-expert" and model["image"] is None  # the local backend ran a command
    assert model["server_metadata"]["model"] == "metaworld-expert"  # the server's own metadata frame
    used = result["server"]["port"]
    assert used != 9999
    assert any("policy.remote_port 9999 was not used" in w and f"port {used}" in w for w in result["warnings"])
    html = (out / "index.html").read_text()
    assert "experts/scripted" in html and "server metadata" in html and f":{used}" in html

    compared = _arena("compare", runs["r1"][0], runs["r2"][0], cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert re.search(r"run reach: the same policy type was served by different\s+models:\s+revision\s+\(A 'r1',\s+B\s+'r2'\)", compared.stdout)


def test_an_unreachable_external_server_shows_as_a_failed_run_with_its_reason(tmp_path):
    port = _free_port()  # nothing listens there
    exp = _experiment(tmp_path / "exp.yaml", {
        "policy": {"type": "metaworld_expert_remote", "remote_port": port, "connect_timeout_s": 1},
        "server": {"external": True},
    })
    out = tmp_path / "out"
    done = _arena("run", exp, "--output-dir", out, cwd=tmp_path)
    assert done.returncode == 3
    assert "0–100%" not in done.stdout  # no interval without an episode
    assert re.search(r"reach\s*│\s*failed", done.stdout) and "cannot connect" in done.stdout
    html = (out / "index.html").read_text()
    assert "No run made requests to a policy server" not in html
    latency = html[html.index('id="latency"'):html.index('id="provenance"')]
    assert "reach" in latency and "cannot connect" in latency and f":{port}" in latency
    runs_table = html[html.index('id="runs"'):html.index('id="chart"')]
    assert 'class="state-failed">failed' in runs_table and "cannot connect" in runs_table
