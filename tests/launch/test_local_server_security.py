"""Keys, exposure and impostors under the local backend, with real server processes.

A keyed server becomes ready (the probe presents the clients' key) and a wrong key fails
fast naming the 401; an exposed server requires a key generated for the run that no file
holds; a port taken by another process (an impostor answering the readiness probe) never
makes a run complete against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from arena.launch.server_process import LocalServer
from arena.servertask import ServerTask
from arena.testing import OpenPIDouble, RecordingModel

pytestmark = pytest.mark.slow

REACH = {"type": "metaworld", "task": "reach-v3"}
SERVE = ["{python}", "-m", "arena", "serve", "metaworld-expert", "--host", "{host}", "--port", "{port}"]


def write_experiment(tmp_path: Path, run: dict, launch: dict | None = None, episodes: int = 2) -> Path:
    doc = {
        "launch": launch or {"backend": "local"},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": episodes}},
        "runs": {"expert": run},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def arena_run(path: Path, out: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def test_a_keyed_arena_serve_becomes_ready_and_the_experiment_completes(tmp_path):
    run = {
        "environment": REACH,
        "policy": {"type": "metaworld_expert_remote", "api_key_env": "EXPERT_KEY"},
        "server": {
            "local_command": [*SERVE, "--api-key-env", "EXPERT_KEY"],
            "api_key_args": ["--api-key-env", "{api_key_env}"],  # how this command requires a key
            "startup_timeout_s": 120,
        },
    }
    out = tmp_path / "out"
    result = arena_run(write_experiment(tmp_path, run), out, env={"EXPERT_KEY": "s3cret-key"})
    assert result.returncode == 0, result.stdout + result.stderr
    run_result = read_json(out / "expert" / "run_result.json")
    assert run_result["state"] == "completed" and run_result["counts"]["error"] == 0
    assert run_result["server"]["api_key"] == "user" and run_result["server"]["exposed"] is False
    server = read_json(out / "provenance.json")["servers"]["expert"]
    assert server["server_key_env"] == "EXPERT_KEY" and server["authenticated"] is True
    assert not any("s3cret-key" in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_a_wrong_key_fails_the_run_fast_naming_the_401(tmp_path):
    run = {
        "environment": REACH,
        "policy": {"type": "metaworld_expert_remote", "api_key_env": "CLIENT_KEY"},
        "server": {"local_command": [*SERVE, "--api-key-env", "SERVER_KEY"], "startup_timeout_s": 3600},
    }
    out = tmp_path / "out"
    started = time.monotonic()
    result = arena_run(write_experiment(tmp_path, run), out, env={"CLIENT_KEY": "a", "SERVER_KEY": "b"}, timeout=600)
    assert result.returncode == 3, result.stdout + result.stderr
    error = read_json(out / "expert" / "run_result.json")["error"]
    assert "refused the readiness probe's API key" in error and "HTTP 401" in error, error
    # fast: at the server's first answer, not after startup_timeout_s (an hour)
    assert time.monotonic() - started < 600


def test_an_exposed_server_requires_a_key_generated_for_the_run_that_no_file_holds(tmp_path):
    seen = tmp_path / "server-saw.json"  # outside the output directory
    record = (
        "import json, os, sys; "
        f"open({str(seen)!r}, 'w').write(json.dumps(dict(key=os.environ.get('ARENA_SERVER_API_KEY'), argv=sys.argv[1:]))); "
        "os.execv(sys.executable, [sys.executable, '-m', 'arena', *sys.argv[1:]])"
    )
    command = ["{python}", "-c", record, "serve", "metaworld-expert", "--host", "{host}", "--port", "{port}"]
    server = {"local_command": command, "api_key_args": ["--api-key-env", "{api_key_env}"]}
    run = {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": server}
    out = tmp_path / "out"
    path = write_experiment(tmp_path, run, launch={"backend": "local", "local": {"host": "0.0.0.0"}})
    dry = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--dry-run"], capture_output=True, text=True)
    assert "binds 0.0.0.0: EXPOSED to the network, requires an API key generated for this run" in dry.stdout, dry.stdout
    result = arena_run(path, out)
    assert result.returncode == 0, result.stdout + result.stderr
    saw = read_json(seen)
    key = saw["key"]
    assert key and len(key) == 64
    assert saw["argv"][-2:] == ["--api-key-env", "ARENA_SERVER_API_KEY"]  # the server required it
    for file in (p for p in out.rglob("*") if p.is_file()):
        assert key not in file.read_text(errors="replace"), f"the generated key leaked into {file}"
    provenance = read_json(out / "provenance.json")["servers"]["expert"]
    assert provenance == {
        "server": "metaworld-expert", "bind": "0.0.0.0", "exposed": True, "key": "generated",
        "server_key_env": "ARENA_SERVER_API_KEY", "client_key_env": "ARENA_SERVER_API_KEY", "authenticated": True,
    }
    assert read_json(out / "expert" / "run_result.json")["server"]["api_key"] == "generated"


def _expert_actions(request: dict[str, Any]) -> dict[str, Any]:
    return {"actions": np.zeros((1, 4), np.float32)}  # a valid Meta-World action: on main the run completes


def test_an_impostor_holding_the_port_never_serves_the_run(tmp_path):
    """The real server is slow to bind; an impostor takes its port first and answers the probe."""
    slow = (
        "import os, sys, time; time.sleep(5); "
        "os.execv(sys.executable, [sys.executable, '-m', 'arena', *sys.argv[1:]])"
    )
    command = ["{python}", "-c", slow, "serve", "metaworld-expert", "--host", "{host}", "--port", "{port}"]
    run = {"environment": REACH, "policy": {"type": "metaworld_expert_remote"}, "server": {"local_command": command}}
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena", "run", str(write_experiment(tmp_path, run)), "--output-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    impostor = None
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "starting server" in line and impostor is None:
                port = int(line.split(" for ")[0].rsplit(":", 1)[1])
                impostor = OpenPIDouble(RecordingModel(_expert_actions), port=port).__enter__()
        proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()
        if impostor is not None:
            impostor.__exit__(None, None, None)
    output = "".join(lines)
    assert impostor is not None, output
    assert impostor.model.requests == [], "the run sent inference requests to the impostor"
    assert proc.returncode == 0, output  # it moved to another port and ran against its own server
    log = (out / "expert" / "server.log").read_text()
    assert f"answered by pid {os.getpid()}" in log and "starting it again on another port" in log, log


def test_a_server_whose_given_port_is_taken_fails_naming_the_impostor(tmp_path):
    with OpenPIDouble(RecordingModel(_expert_actions)) as impostor:
        task = ServerTask(name="expert", local_command=SERVE, startup_timeout_s=120)
        server = LocalServer(task, "127.0.0.1", impostor.port, tmp_path / "server.log")
        server.start()
        deadline = time.monotonic() + 120
        while server.poll() == "starting" and time.monotonic() < deadline:
            time.sleep(0.1)
        server.stop()
    assert server.state == "failed", server.error
    assert f"port {impostor.port}" in server.error
    assert f"pid {os.getpid()}" in server.error or "address already in use" in server.error, server.error
    assert impostor.model.requests == []
