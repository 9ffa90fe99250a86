"""The local backend restarts a policy server that dies mid-episode; the run still finishes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from arena.testing.experiments import run_in_child

pytestmark = pytest.mark.slow

REACH = {"type": "metaworld", "task": "reach-v3"}


def _flaky_server(marker: Path, exit_on_request: int) -> dict:
    """The Meta-World expert behind arena's server, SIGKILL-like exit on one request, once."""
    return {
        "local_command": [
            "{python}", "-c", "from arena.testing.doubles import main; main()",
            "--host", "{host}", "--port", "{port}", "--model", "metaworld-expert",
            "--exit-on-request", str(exit_on_request), "--exit-marker", str(marker),
        ],
        "readiness": "websocket",
        "startup_timeout_s": 60,
    }


def _run(tmp_path: Path, marker: Path, restarts: int, policy: dict) -> tuple[subprocess.CompletedProcess, Path]:
    doc = {
        "launch": {"backend": "local", "local": {"jobs": 1, "server_restarts": restarts}},
        "shared": {"environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": 4}},
        "runs": {
            "crashy": {
                "environment": REACH,
                "policy": {"type": "metaworld_expert_remote", "request_timeout_s": 20, **policy},
                "server": _flaky_server(marker, exit_on_request=25),
            }
        },
    }
    out = tmp_path / "out"
    return run_in_child(doc, tmp_path / "exp.yaml", out, timeout_s=240), out


def test_a_server_killed_mid_episode_is_restarted_and_every_episode_is_recorded(tmp_path: Path) -> None:
    marker = tmp_path / "server-died-once"
    result, out = _run(tmp_path, marker, restarts=2, policy={})
    assert marker.exists(), "the server never crashed"
    server_log = (out / "crashy" / "server.log").read_text()
    assert "restart 1 of 2" in server_log, server_log[-2000:]
    assert "restarting it" in result.stdout, result.stdout
    records = [json.loads(line) for line in (out / "crashy" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["episode_index"] for r in records) == [0, 1, 2, 3], result.stdout + result.stderr
    outcomes = {r["outcome"] for r in records}
    assert "failure" not in outcomes, records
    assert outcomes <= {"success", "timeout", "error"}
    for record in records:
        if record["outcome"] == "error":
            assert record["error"], record
    run_result = json.loads((out / "crashy" / "run_result.json").read_text())
    assert run_result["state"] == "completed", run_result
    assert sum(run_result["counts"].values()) == 4


def test_without_restarts_the_episodes_cut_short_are_errors_never_failures(tmp_path: Path) -> None:
    marker = tmp_path / "server-died-once"
    policy = {"connect_timeout_s": 1, "reconnect_timeout_s": 1, "max_reconnect_attempts": 1}
    result, out = _run(tmp_path, marker, restarts=0, policy=policy)
    assert marker.exists()
    assert "server metaworld-expert failed" in result.stdout, result.stdout
    records = [json.loads(line) for line in (out / "crashy" / "episodes.jsonl").read_text().splitlines()]
    errors = [r for r in records if r["outcome"] == "error"]
    assert len(errors) >= 2, records
    assert all(r["outcome"] != "failure" for r in records)
    assert all("ServerUnavailable" in r["error"] or "reconnect failed" in r["error"] for r in errors), errors
