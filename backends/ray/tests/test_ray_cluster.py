"""The Ray backend on a real Ray cluster on loopback: a head and two worker nodes
(``ray.cluster_utils.Cluster``, one per module: each Ray start costs seconds of CPU).

Two runs sharing one server task on one node: one policy server starts, both runs complete with
the local backend's totals. A worker node removed mid-run: its leased episodes are run by the other node's task, every
episode is recorded once and the totals equal a local run's. ``arena cancel``: every task's
``arena node`` records ``cancelled`` and none is left running; ``arena run --resume`` then
runs the rest on the same cluster, each episode recorded once in all.
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
