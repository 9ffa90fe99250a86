"""The Ray backend on a real Ray cluster on loopback: a head and two worker nodes
(``ray.cluster_utils.Cluster``, one per module: each Ray start costs seconds of CPU).

Two runs sharing one server task on one node: one policy server starts, both runs complete with
the local backend's totals. A worker node removed mid-run: its leased episodes are run by the other node's task, every
episode is recorded once and the totals equal a local run's. ``arena cancel``: every task's
``arena node`` records ``cancelled`` and none is left running; ``arena run --resume`` then
runs the rest on the same cluster, each episode recorded once in all.

The head lost needs a cluster of its own (``ray start --head --block`` in its own process
group, killed with SIGKILL): the run fails within seconds naming the lost head, the recorded
episodes stay, and ``arena run --resume`` finishes the run on another cluster (the module's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from arena.outputs.records import read_records  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
FAKES = ROOT / "tests" / "rollout"
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@pytest.fixture(scope="module")
def cluster():
    """Head (no CPUs: no task runs there) and two worker nodes of one CPU each: one task per node."""
    saved = {k: os.environ.get(k) for k in (*LOOPBACK, "PYTHONPATH", "ARENA_ALLOW_IMPORTS")}
    os.environ.update(LOOPBACK)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])
    os.environ["ARENA_ALLOW_IMPORTS"] = "rollout_fakes"
    c = Cluster(initialize_head=True, connect=False,
                head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    workers = [c.add_node(num_cpus=1, node_ip_address="127.0.0.1") for _ in range(2)]
    c.wait_for_nodes()
    try:
        yield c, workers
    finally:
        c.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def experiment(path: Path, address: str, episodes: int, step_delay_s: float, backend: str = "ray",
               hold_file: Path | None = None) -> Path:
    path.write_text(yaml.safe_dump({
        "launch": {"backend": backend, **({"ray": {"address": address, "nodes": 2, "lease_s": 3,
                                                    "cancel_grace_s": 10, "poll_interval_s": 0.3}} if backend == "ray" else {})},
        "runs": {"count": {
            "environment": {"type": "rollout_fakes:CounterEnv", "step_delay_s": step_delay_s,
                            **({"hold_file": str(hold_file)} if hold_file else {})},
            "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
            "environment_builder": {"num_envs": 1, "seed": 0},
            "rollout_limit": {"num_episodes": episodes},
        }},
    }))
    return path


def start_run(exp: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arena", "run", str(exp), "--output-dir", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def records(out: Path) -> list:
    found = []
    for path in sorted((out / "count").rglob("episodes.jsonl")):
        found += read_records(path)[0]
    return found


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def shard_states(out: Path) -> list[str | None]:
    states = []
    for k in (0, 1):
        path = out / "count" / "shards" / str(k) / "status.json"
        states.append(json.loads(path.read_text()).get("state") if path.exists() else None)
    return states


def test_arena_cancel_stops_every_task_and_resume_finishes_the_run(cluster, tmp_path):
    address = cluster[0].address
    out = tmp_path / "out"
    episodes = 16
    hold = tmp_path / "hold"  # each runner records its first episode, then waits until resume
    hold.touch()
    proc = start_run(experiment(tmp_path / "exp.yaml", address, episodes, 0, hold_file=hold), out)
    try:
        wait_for(lambda: shard_states(out) == ["running", "running"] and len(records(out)) == 2, 120,
                 "both tasks' runners to record an episode")
        pids = [json.loads((out / "count" / "shards" / str(k) / "status.json").read_text())["pid"] for k in (0, 1)]
        done = subprocess.run([sys.executable, "-m", "arena", "cancel", str(out)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, output
    assert shard_states(out) == ["cancelled", "cancelled"], output
    for pid in pids:  # every runner is gone
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z",
                 30, f"runner {pid} to exit")
    assert len(records(out)) == 2  # what was finished before the cancel is kept
    hold.unlink()
    assert _status(out)[0] == "cancelled"
    # nothing of the run is left on the cluster: its tasks ended, their CPUs are free again
    wait_for(lambda: _free_cpus(address) == 2, 30, "the tasks' CPUs to be free")
    # the rest runs on resume: each episode recorded once in all
    done = subprocess.run([sys.executable, "-m", "arena", "run", "--resume", str(out)], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(r.episode_index for r in records(out)) == list(range(episodes))
    assert _status(out) == ("completed", episodes, episodes)


def _status(out: Path) -> tuple[str, int, int]:
    """What `arena status` reads for the run: state, episodes done and planned."""
    from arena.launch.base import Submission
    from arena_ray.backend import RayBackend
    from arena_ray.options import RayOptions

    row = RayBackend(RayOptions()).status(Submission.load(out))["count"]
    return row["state"], row["episodes_done"], row["episodes_total"]


def _free_cpus(address: str) -> float:
    script = f"import ray; ray.init(address={address!r}, log_to_driver=False); print(ray.available_resources().get('CPU', 0))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    return float(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else -1.0


def test_a_worker_node_removed_mid_run_has_its_episodes_rerun_and_totals_equal_a_local_run(cluster, tmp_path):
    c, workers = cluster
    episodes = 12
    out = tmp_path / "out"
    proc = start_run(experiment(tmp_path / "exp.yaml", c.address, episodes, 0.1), out)
    try:
        wait_for(lambda: shard_states(out) == ["running", "running"] and len(records(out)) >= 2, 120,
                 "both tasks to record episodes")
        c.remove_node(workers[1])  # its raylet and workers die, and with them its task's arena node
        output, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
        workers[1] = c.add_node(num_cpus=1, node_ip_address="127.0.0.1")  # for the next test of the module
    assert proc.returncode == 0, output
    got = records(out)
    indices = [r.episode_index for r in got]
    assert sorted(indices) == list(range(episodes)), output  # each episode once: none lost, none twice
    local_out = tmp_path / "local"
    done = subprocess.run([sys.executable, "-m", "arena", "run", str(experiment(tmp_path / "local.yaml", "", episodes, 0, "local")),
                           "--output-dir", str(local_out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    local = read_records(local_out / "count" / "episodes.jsonl")[0]
    assert {(r.episode_index, r.seed, r.outcome) for r in got} == {(r.episode_index, r.seed, r.outcome) for r in local}
    ray_result = json.loads((out / "experiment_result.json").read_text())["runs"]["count"]
    local_result = json.loads((local_out / "experiment_result.json").read_text())["runs"]["count"]
    assert ray_result["state"] == "completed"
    for key in ("counts", "success_rate", "episodes_recorded"):
        assert ray_result.get(key) == local_result.get(key), key
    assert "ended" in output  # the lost task is named in the run's output
    assert _status(out) == ("completed", episodes, episodes)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_head(cpus: int) -> tuple[subprocess.Popen, str, str]:
    """`ray start --head --block` in a session of its own (its process group holds the GCS, the
    raylet and every worker: killing that group is the head machine lost); token auth off, as
    the Cluster fixture's in-process head has it. Returns the process, address and temp dir."""
    import tempfile

    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray's unix socket paths live under it
    ray_bin = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [str(ray_bin), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, **LOOPBACK, "RAY_AUTH_MODE": "disabled"},
    )
    return head, f"127.0.0.1:{port}", temp


def _stop_head(head: subprocess.Popen, temp: str) -> None:
    import shutil

    if head.poll() is None:
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait(timeout=30)
    shutil.rmtree(temp, ignore_errors=True)


def test_the_head_lost_mid_run_fails_the_run_naming_the_cluster_and_resume_finishes_it(cluster, tmp_path, monkeypatch):
    # Its own cluster (the head must die): `address: auto` finds it through $RAY_ADDRESS, as
    # inside a Slurm job or a KubeRay pod; the resume joins another cluster the same way (the
    # module's: a third head would only cost seconds of CPU).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    for key, value in LOOPBACK.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("ARENA_ALLOW_IMPORTS", "rollout_fakes")
    head, address, temp = _start_head(cpus=2)
    out = tmp_path / "out"
    episodes = 8
    hold = tmp_path / "hold"  # each runner records its first episode, then holds in its second
    hold.touch()
    try:
        monkeypatch.setenv("RAY_ADDRESS", address)
        proc = start_run(experiment(tmp_path / "exp.yaml", "auto", episodes, 0, hold_file=hold), out)
        try:
            wait_for(lambda: len(records(out)) == 2 and shard_states(out) == ["running", "running"], 120,
                     "both tasks' runners to record an episode")
            os.killpg(head.pid, signal.SIGKILL)  # the head machine lost: GCS, raylet and the tasks' workers
            lost_at = time.monotonic()
            output, _ = proc.communicate(timeout=120)
            took = time.monotonic() - lost_at
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        _stop_head(head, temp)
    assert proc.returncode == 3, output
    assert took < 60, took  # ended with the reason, not a hang
    result = json.loads((out / "experiment_result.json").read_text())["runs"]["count"]
    assert result["state"] == "failed", result
    assert address in result["error"] and "lost" in result["error"], result["error"]
    assert len(records(out)) == 2  # what finished before the loss is kept
    hold.unlink()
    monkeypatch.setenv("RAY_ADDRESS", cluster[0].address)  # a cluster that is up
    done = subprocess.run([sys.executable, "-m", "arena", "run", "--resume", str(out)], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(r.episode_index for r in records(out)) == list(range(episodes))
    assert _status(out) == ("completed", episodes, episodes)


# The Meta-World expert behind arena's server double. Its first life writes its PID to the
# marker file and hangs on its second inference, so the run cannot go on (nor end) until the
# test kills it; a restarted server (the marker exists) answers every request.
HANGING_SERVER = """
import os, sys, threading
from pathlib import Path
from arena.testing import doubles
marker = Path(sys.argv[3])
if not marker.exists():
    build = doubles.chunk_model_from_args
    class Hangs:
        def __init__(self, model):
            self.model, self.calls = model, 0
        def __getattr__(self, name):
            return getattr(self.model, name)
        def _count(self):
            self.calls += 1
            if self.calls == 2:
                marker.write_text(str(os.getpid()))
                threading.Event().wait()
        def infer(self, obs):
            self._count()
            return self.model.infer(obs)
        def infer_batch(self, batch):
            self._count()
            return self.model.infer_batch(batch)
    doubles.chunk_model_from_args = lambda args: Hangs(build(args))
doubles.main(["--host", sys.argv[1], "--port", sys.argv[2], "--model", "metaworld-expert"])
"""


def test_a_policy_server_killed_in_its_ray_task_is_restarted_and_the_run_completes(cluster, tmp_path):
    marker = tmp_path / "server-pid"
    episodes = 3
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({
        "launch": {"backend": "ray", "ray": {"address": cluster[0].address, "nodes": 1, "runner_cpus": 0.5,
                                             "poll_interval_s": 0.3}},
        "runs": {"expert": {
            "environment": {"type": "metaworld", "task": "reach-v3"},
            "policy": {"type": "metaworld_expert_remote", "request_timeout_s": 60},
            "server": {"local_command": ["{python}", "-c", HANGING_SERVER, "{host}", "{port}", str(marker)],
                       "readiness": "websocket", "startup_timeout_s": 60, "resources": {"cpu": 0}},
            "environment_builder": {"num_envs": 1, "seed": 0},
            "rollout_limit": {"num_episodes": episodes, "max_episode_steps": 20},
        }},
    }))
    out = tmp_path / "out"
    proc = start_run(tmp_path / "exp.yaml", out)
    try:
        wait_for(lambda: marker.exists() and marker.read_text().strip(), 120, "the server to hang on its 2nd request")
        os.kill(int(marker.read_text()), signal.SIGKILL)  # the server process arena node started
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (0, 3), output  # 3: the episode cut short by the kill may be an error episode
    log = (out / "expert" / "server.log").read_text()
    assert "restart 1 of 2" in log, log[-3000:]
    result = json.loads((out / "experiment_result.json").read_text())["runs"]["expert"]
    assert result["state"] == "completed", result
    got = read_records(out / "expert" / "episodes.jsonl")[0]
    assert sorted(r.episode_index for r in got) == list(range(episodes))
    assert all(r.outcome != "failure" for r in got), [(r.outcome, r.error) for r in got]  # never blamed on the policy
    assert all(r.error for r in got if r.outcome == "error")


def test_two_runs_sharing_a_server_task_start_one_server_on_their_node_with_the_local_totals(cluster, tmp_path):
    reach = {"type": "metaworld", "task": "reach-v3"}
    doc = {
        "launch": {"backend": "ray", "ray": {"address": cluster[0].address, "nodes": 1, "poll_interval_s": 0.3,
                                             "runners": 2, "runner_cpus": 0.5}},  # both runners at once: one CPU
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 2},
                   "server": {"resources": {"cpu": 0}}},  # a worker node has one CPU, the runners take it
        "runs": {"a": {"environment": reach, "policy": {"type": "metaworld_expert_remote"}},
                 "b": {"environment": reach, "policy": {"type": "metaworld_expert_remote"}}},
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "exp.yaml"), "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted 1 Ray task(s) for 2 run(s) (1 server group(s))" in done.stdout, done.stdout
    node_log = (out / "a" / "node.log").read_text()
    assert node_log.count("starting policy server metaworld-expert") == 1 and "for runs a, b" in node_log, node_log
    servers = [json.loads((out / run / "run_result.json").read_text())["server"] for run in ("a", "b")]
    assert servers[0]["port"] == servers[1]["port"] and servers[0]["shared_by"] == ["a", "b"]
    for run in ("a", "b"):  # the one server's log, in each run's own work directory
        assert (out / run / "server.log").read_text().count("serving metaworld-expert") == 1
    doc["launch"] = {"backend": "local"}
    del doc["runs"]["b"]  # the same run as a (same environment, policy and seeds): one local run gives both totals
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(doc))
    local_out = tmp_path / "local"
    done = subprocess.run([sys.executable, "-m", "arena", "run", str(tmp_path / "local.yaml"), "--output-dir",
                           str(local_out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ray_runs = json.loads((out / "experiment_result.json").read_text())["runs"]
    local_runs = json.loads((local_out / "experiment_result.json").read_text())["runs"]
    for run in ("a", "b"):
        assert ray_runs[run]["state"] == "completed"
        for key in ("counts", "success_rate", "episodes_recorded"):
            assert ray_runs[run].get(key) == local_runs["a"].get(key), (run, key)
