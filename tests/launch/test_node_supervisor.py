"""``arena node``, the node supervisor a Slurm job or an OSMO task runs: the real CLI, real
server processes on loopback, and a stand-in runner (the spec's ``arena`` command) that does
what run-one would do to the files, so each fault is quick and deterministic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena.launch.node import NodeServer, NodeSpec
from arena.servertask import ServerTask

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and /proc as on Linux")

# A TCP server on $PORT that, with a first argument, exits with code 7 that many seconds after it
# became ready (and prints why). With DEAF set it ignores SIGTERM.
SERVER = """
import os, signal, socket, sys, time
if os.environ.get("DEAF"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen(8)
print("serving", flush=True)
s.settimeout(0.1)
start = time.monotonic()
while True:
    try:
        s.accept()[0].close()
    except OSError:
        pass
    if len(sys.argv) > 1 and time.monotonic() - start > float(sys.argv[1]):
        print("simulated crash: the model process died", flush=True)
        os._exit(7)
"""

# Stands in for `arena run-one`: notes its arguments and where the server is, writes
# `running`, then waits; SIGUSR1/SIGTERM end it without a final state (as a killed runner would),
# or with `done` in its argv's run name it completes.
RUNNER = """
import json, os, signal, sys, time
args = sys.argv[1:]
out = args[args.index("--output-dir") + 1]; run = args[args.index("--run") + 1]
work = os.path.join(out, run)
def stop(signum, _):
    with open(os.path.join(work, "runner.signal"), "w") as f:
        f.write(signal.Signals(signum).name)
    sys.exit(1)
signal.signal(signal.SIGUSR1, stop); signal.signal(signal.SIGTERM, stop)  # before runner.json: the tests signal once it exists
with open(os.path.join(work, "runner.json"), "w") as f:
    json.dump({"argv": args, "host": os.environ.get("ARENA_SERVER_HOST"), "port": os.environ.get("ARENA_SERVER_PORT"),
               "info": os.environ.get("ARENA_SERVER_INFO"), "task": os.environ.get("ARENA_SERVER_TASK")}, f)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(1)
"""


def _spec(tmp_path: Path, server_args: str = "", *, timeout: float = 20, restarts: int = 0, grace: float = 5,
          env: dict[str, str] | None = None) -> Path:
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "runner.py").write_text(RUNNER)
    task = ServerTask(name="toy", readiness="tcp", startup_timeout_s=timeout, env=env or {})
    spec = NodeSpec(
        output_dir=str(tmp_path / "out"), run="r", snapshot=str(tmp_path / "experiment.yaml"),
        arena=[sys.executable, str(tmp_path / "runner.py")],
        server=NodeServer(task=task, command=f"exec {sys.executable} {tmp_path / 'server.py'} {server_args}",
                          restarts=restarts, restarts_option="launch.test.server_restarts", stop_grace_s=grace),
        poll_s=0.1,
    )
    path = tmp_path / "r.node.json"
    path.write_text(spec.model_dump_json())
    return path


def _node(spec: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arena", "node", str(spec), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_server_that_keeps_dying_is_restarted_then_the_runner_is_stopped_with_its_log(tmp_path):
    node = _node(_spec(tmp_path, "1.0", restarts=1))
    output, _ = node.communicate(timeout=120)
    work = tmp_path / "out" / "r"
    assert node.returncode == 1, output  # the runner's exit code
    runner = _read(work / "runner.json")
    assert runner["argv"][:6] == ["run-one", str(tmp_path / "experiment.yaml"), "--run", "r", "--output-dir",
                                  str(tmp_path / "out")]
    assert runner["host"] == "127.0.0.1" and int(runner["port"]) == json.loads(runner["info"])["port"]
    assert json.loads(runner["task"])["name"] == "toy"
    assert (work / "runner.signal").read_text() == "SIGUSR1"  # stopped with why, not left to error episodes
    status, result = _read(work / "status.json"), _read(work / "run_result.json")
    assert status["state"] == result["state"] == "failed"
    assert "exited with code 7 and was restarted 1 time(s) (launch.test.server_restarts=1)" in status["error"]
    assert "simulated crash: the model process died" in status["error"]
    log = (work / "server.log").read_text()
    assert "restart 1 of 1" in log and log.count("serving") == 2, log


def test_a_server_never_ready_fails_the_run_and_the_runner_never_starts(tmp_path):
    spec = _spec(tmp_path, timeout=1.5)
    (tmp_path / "server.py").write_text("import time; time.sleep(60)\n")  # never listens
    node = _node(spec)
    output, _ = node.communicate(timeout=120)
    work = tmp_path / "out" / "r"
    assert node.returncode == 3, output
    assert not (work / "runner.json").exists()
    status = _read(work / "status.json")
    assert status["state"] == "failed" and "was not ready (tcp on 127.0.0.1:" in status["error"]
    assert "startup_timeout_s=1.5" in status["error"] and status["server"]["task"] == "toy"
    assert _read(work / "run_result.json")["counts"]["failure"] == 0  # infrastructure, not policy failures


def test_sigterm_cancels_the_run_and_a_server_deaf_to_sigterm_is_killed_after_the_grace(tmp_path):
    node = _node(_spec(tmp_path, grace=1, env={"DEAF": "1"}))
    work = tmp_path / "out" / "r"
    try:
        deadline = time.monotonic() + 60
        while not (work / "runner.json").exists():
            assert node.poll() is None and time.monotonic() < deadline, node.communicate()[0]
            time.sleep(0.05)
        os.kill(node.pid, signal.SIGTERM)  # scancel, OSMO's cancel
        output, _ = node.communicate(timeout=60)
    finally:
        if node.poll() is None:
            os.killpg(node.pid, signal.SIGKILL)
    assert (work / "runner.signal").read_text() == "SIGTERM", output
    status = _read(work / "status.json")
    assert status["state"] == "cancelled", status
    log = (work / "server.log").read_text()
    assert "stopping the policy server (the runner has ended): SIGTERM, SIGKILL after 1 s" in log
    assert "did not stop within 1 s: SIGKILL" in log, log


def test_a_time_limit_noted_before_arena_started_ends_the_run_failed_naming_it(tmp_path):
    spec = _read(_spec(tmp_path))
    spec["time_limit"] = "launch.slurm.time=10"
    (tmp_path / "r.node.json").write_text(json.dumps(spec))
    node = _node(tmp_path / "r.node.json", "--signalled", "USR1")
    output, _ = node.communicate(timeout=60)
    status = _read(tmp_path / "out" / "r" / "status.json")
    assert node.returncode == 3 and status["state"] == "failed", output
    assert status["error"].startswith("stopped at the time limit (launch.slurm.time=10)")
    assert f"arena run --resume {tmp_path / 'out'}" in status["error"]


def test_a_server_started_elsewhere_that_never_answers_fails_the_run_before_the_runner(tmp_path):
    """OSMO: the server is another task; the node supervisor only waits for it (what
    runner_failure.py used to record after a failed `arena probe`)."""
    from arena.launch.server_process import free_port

    (tmp_path / "runner.py").write_text(RUNNER)
    port = free_port()  # nothing listens there
    spec = NodeSpec(
        output_dir="$NODE_TEST_OUT", run="r", snapshot="experiment.yaml", arena=[sys.executable, str(tmp_path / "runner.py")],
        server=NodeServer(task=ServerTask(name="remote", readiness="tcp", startup_timeout_s=1.0), command=None,
                          client_host="$NODE_TEST_HOST", port=port, info={"task": "r0-remote-server"}),
    )
    (tmp_path / "node.json").write_text(spec.model_dump_json())
    env = {**os.environ, "NODE_TEST_OUT": str(tmp_path / "out"), "NODE_TEST_HOST": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "arena", "node", str(tmp_path / "node.json")], env=env,
                          capture_output=True, text=True, timeout=120)
    work = tmp_path / "out" / "r"
    assert done.returncode == 3, done.stdout + done.stderr
    assert not (work / "runner.json").exists()
    status, result = _read(work / "status.json"), _read(work / "run_result.json")
    assert status["state"] == result["state"] == "failed"
    assert f"policy server 'remote' was not ready (tcp on 127.0.0.1:{port})" in status["error"]
    assert result["server"]["task"] == "r0-remote-server" and result["server"]["port"] == port


# Stands in for `arena run-one` of the shared-server test: notes where the server is and when it
# ran, holds the server a moment, exits 0.
QUICK_RUNNER = """
import json, os, sys, time
args = sys.argv[1:]
out = args[args.index("--output-dir") + 1]; run = args[args.index("--run") + 1]
started = time.time(); time.sleep(0.3)
with open(os.path.join(out, run, "runner.json"), "w") as f:
    json.dump({"port": os.environ.get("ARENA_SERVER_PORT"), "info": json.loads(os.environ["ARENA_SERVER_INFO"]),
               "started": started, "ended": time.time()}, f)
"""


def test_runs_sharing_a_server_start_it_once_and_run_their_runners_beside_it(tmp_path):
    spec = _read(_spec(tmp_path))
    assert "shared_with" not in spec and "runners" not in spec  # a one-run spec reads as it always did
    spec["shared_with"] = ["s"]
    (tmp_path / "runner.py").write_text(QUICK_RUNNER)
    (tmp_path / "r.node.json").write_text(json.dumps(spec))
    node = _node(tmp_path / "r.node.json")
    output, _ = node.communicate(timeout=60)
    assert node.returncode == 0, output
    assert output.count("starting policy server toy") == 1 and "for runs r, s" in output, output
    first, second = (_read(tmp_path / "out" / run / "runner.json") for run in ("r", "s"))
    assert first["port"] == second["port"] and first["info"]["shared_by"] == ["r", "s"]
    assert first["ended"] <= second["started"]  # runners: 1, in the spec's order
    for run in ("r", "s"):  # each run's states and the server's log in its own work directory
        log = (tmp_path / "out" / run / "server.log").read_text()
        assert log.count("serving") == 1 and "stopping the policy server (the runner has ended)" in log, log
        status = _read(tmp_path / "out" / run / "status.json")
        assert status["run"] == run and status["server"]["port"] == int(first["port"])
