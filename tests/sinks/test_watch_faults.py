"""`arena watch` tried as users do (issue 49 items 5-8): one watch per folder, sharded
checkpoints checked shard by shard, a changed experiment starts a new series, a restarted watch
tries again what failed for a reason other than the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

from arena.testing.experiments import run_in_session


def _experiment(tmp_path: Path, episodes: int = 2, delay: float = 0.0, **env: object) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "shared": {"rollout_limit": {"num_episodes": episodes, "max_episode_steps": 6}},
        "runs": {"toy": {"environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False, "step_delay_s": delay, **env},
                         "policy": {"type": "random_action"}}},
    }))
    return path


def _argv(ckpts: Path, exp: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "arena", "watch", str(ckpts), "--experiment", str(exp), "runs.toy.environment.task={checkpoint}",
            "--output-dir", str(out), "--settle", "0.3", "--poll", "0.2", "--pattern", r"ckpt_(?P<step>\d+)", *extra]


def _write_checkpoint(ckpts: Path, name: str) -> Path:
    (ckpts / name).mkdir(parents=True)
    (ckpts / name / "model.bin").write_bytes(os.urandom(256))
    return ckpts / name


def _state(out: Path) -> dict:
    try:
        return json.loads((out / "watch.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}


def test_a_second_watch_on_the_same_folder_is_refused_naming_the_first(tmp_path: Path) -> None:
    """Item 5: the second watch exits 2 naming the first (its pid and host) and evaluates
    nothing; the first evaluates the checkpoint once and leaves no lock; the lock of a watch
    that died (its pid gone) is taken over."""
    ckpts, out = tmp_path / "ckpts", tmp_path / "watch"
    _write_checkpoint(ckpts, "ckpt_1")
    exp = _experiment(tmp_path, episodes=4, delay=0.05)
    first = subprocess.Popen(_argv(ckpts, exp, out, "--max-evaluations", "1"), cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _state(out).get("checkpoints", {}).get("ckpt_1", {}).get("state") != "running":
            assert first.poll() is None and time.monotonic() < deadline, first.stdout.read() if first.poll() is not None else "timed out"
            time.sleep(0.1)
        code, output = run_in_session(_argv(ckpts, exp, out, "--max-evaluations", "1"), cwd=tmp_path, timeout_s=60)
        assert code == 2, output
        assert f"is owned by another arena watch: process {first.pid} on {socket.gethostname()}" in output, output
        assert first.wait(timeout=120) == 0, first.stdout.read()
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    entry = _state(out)["checkpoints"]["ckpt_1"]
    assert entry["state"] == "done" and entry["attempts"] == 1, entry
    assert "owned by another" not in (out / "ckpt_1.log").read_text()
    assert not (out / "watch.lock").exists()  # released at the end

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid is gone: a watch that died
    (out / "watch.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": "earlier"}))
    code, output = run_in_session(_argv(ckpts, exp, out, "--max-evaluations", "1"), cwd=tmp_path, timeout_s=120)
    assert code == 0, output
    assert f"the lock of arena watch process {dead.pid} (no longer running) was taken over" in output, output
    assert not (out / "watch.lock").exists()


def _safetensors(path: Path, floats: int) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [floats], "data_offsets": [0, 4 * floats]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + bytes(4 * floats))


def test_a_sharded_checkpoint_missing_a_shard_is_refused_naming_the_shard(tmp_path: Path) -> None:
    """Item 6: a checkpoint folder whose ``model.safetensors.index.json`` lists a shard that is
    not there is failed, not evaluated, with that shard named; a whole sharded one is evaluated."""
    ckpts, out = tmp_path / "ckpts", tmp_path / "watch"
    shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    for name in ("ckpt_1", "ckpt_2"):
        folder = ckpts / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"type": "act"}))
        (folder / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": 512}, "weight_map": {"a.weight": shards[0], "b.weight": shards[1], "c.weight": shards[1]}}))
        _safetensors(folder / shards[0], 64)
        if name == "ckpt_1":
            _safetensors(folder / shards[1], 64)
    code, output = run_in_session(_argv(ckpts, _experiment(tmp_path), out, "--max-evaluations", "2"), cwd=tmp_path, timeout_s=240)
    assert code == 3, output
    said = (f"arena watch: ckpt_2 FAILED, not evaluated: {(ckpts / 'ckpt_2').resolve()} is unreadable: "
            f"model.safetensors.index.json: lists shard {shards[1]} (holding 2 of its tensors), which is missing")
    assert said in output, output
    state = _state(out)["checkpoints"]
    assert state["ckpt_1"]["state"] == "done", state
    assert state["ckpt_2"]["state"] == "failed" and state["ckpt_2"]["attempts"] == 0 and state["ckpt_2"]["unreadable"]
    tail = output[output.index("arena watch: summary"):]
    assert f"FAILED ckpt_2 (step 2): unreadable checkpoint ckpt_2/model.safetensors.index.json: lists shard {shards[1]}" in tail, tail
    assert "rewrite it and the watch checks it again" in tail, tail


def test_a_watch_across_a_changed_experiment_starts_a_new_series_naming_the_change(tmp_path: Path) -> None:
    """Item 7: ckpt_100 and ckpt_200 (speed 0.1) form one series; the experiment is edited to
    speed 0.2 while the watch runs, so ckpt_300 starts setup 2: the watch says what changed, the
    table, the page and the trackers' series keep it apart. The checkpoint's own override (its
    path as the task) is not a change."""
    ckpts, out = tmp_path / "ckpts", tmp_path / "watch"
    exp = _experiment(tmp_path, speed=0.1)
    proc = subprocess.Popen(_argv(ckpts, exp, out, "--max-evaluations", "3"), cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for step in (100, 200, 300):
            if step == 300:
                _experiment(tmp_path, speed=0.2)  # the user edits the experiment between checkpoints
            _write_checkpoint(ckpts, f"ckpt_{step}")
            deadline = time.monotonic() + 180
            while _state(out).get("checkpoints", {}).get(f"ckpt_{step}", {}).get("state") != "done":
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() is not None else "timed out"
                time.sleep(0.2)
        assert proc.wait(timeout=120) == 0
        output = proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert ("arena watch: the experiment changed since setup 1 (from ckpt_100): runs.toy.environment.speed: 0.1 -> 0.2. "
            "ckpt_300 starts setup 2") in output, output
    state = _state(out)
    assert {n: c["series"] for n, c in state["checkpoints"].items()} == {"ckpt_100": 1, "ckpt_200": 1, "ckpt_300": 2}
    assert state["checkpoints"]["ckpt_100"]["setup_fingerprint"] == state["series"][0]["fingerprint"]
    assert state["series"][1]["changes"] == ["runs.toy.environment.speed: 0.1 -> 0.2"]
    tail = output[output.index("arena watch: summary"):]
    header = tail.splitlines()[1]
    assert "toy · setup 2" in header, tail
    row = next(line for line in tail.splitlines() if "ckpt_300" in line and "/2 = " in line)
    assert row.index("/2 = ") > header.index("toy · setup 2") - 2, tail  # in the setup-2 column, not toy's
    assert "setup 2 (from ckpt_300): the experiment changed: runs.toy.environment.speed: 0.1 -> 0.2" in tail, tail
    page = (out / "index.html").read_text()
    assert "Changed experiment" in page and "toy · setup 2" in page
    series = [yaml.safe_load((out / n / "experiment.yaml").read_text())["tracking"]["series"] for n in ("ckpt_100", "ckpt_200", "ckpt_300")]
    assert series[0] == series[1] and series[2] == series[0] + "-setup2", series


_FLAKY_ENV = '''
from pathlib import Path
from arena.testing.envs import ToyReachEnv


class FlakyEnv(ToyReachEnv):
    """Cannot be built while the checkpoint folder (its task) holds a file named `broken`."""

    def __init__(self, config, **kwargs):
        if (Path(config.task) / "broken").exists():
            raise RuntimeError("simulator could not be built: out of GPU memory")
        super().__init__(config, **kwargs)
'''


def test_a_restarted_watch_evaluates_a_checkpoint_that_failed_for_another_reason_once_fixed(tmp_path: Path) -> None:
    """Item 8: a checkpoint whose simulator could not be built fails for good in one watch (the
    listing says a restart tries it again); once the cause is gone, a restarted watch evaluates it
    without --retries being raised."""
    ckpts, out = tmp_path / "ckpts", tmp_path / "watch"
    (tmp_path / "flaky_env.py").write_text(_FLAKY_ENV)
    exp = _experiment(tmp_path)
    data = yaml.safe_load(exp.read_text())
    data["runs"]["toy"]["environment"]["type"] = "flaky_env:FlakyEnv"
    exp.write_text(yaml.safe_dump(data))
    (_write_checkpoint(ckpts, "ckpt_200") / "broken").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    argv = _argv(ckpts, exp, out, "--max-evaluations", "1", "--retries", "0", "--allow-import", "flaky_env")
    code, output = run_in_session(argv, cwd=tmp_path, env=env, timeout_s=240)
    assert code == 3, output
    assert "no attempt left (a restarted watch tries it again)" in output, output
    tail = output[output.index("arena watch: summary"):]
    assert "FAILED ckpt_200 (step 200): run toy:" in tail and "start the watch again to retry it once the cause is fixed" in tail, tail

    (ckpts / "ckpt_200" / "broken").unlink()  # the cause is fixed
    code, output = run_in_session(argv, cwd=tmp_path, env=env, timeout_s=240)
    assert code == 0, output
    assert "arena watch: ckpt_200 failed in an earlier watch after 1 attempt(s)" in output, output
    assert "trying ckpt_200 again (attempt 1 of 1 in this watch" in output, output
    entry = _state(out)["checkpoints"]["ckpt_200"]
    assert entry["state"] == "done" and entry["attempts"] == 2, entry


def test_a_lock_whose_pid_now_belongs_to_another_process_is_stale(tmp_path: Path) -> None:
    """A pid reused by a later process (its start time differs from the one the lock recorded)
    does not keep a dead watch's folder; the live owner's lock is refused."""
    from arena.errors import ConfigError
    from arena.folder_lock import FolderLock

    lock = tmp_path / "watch.lock"
    lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "pid_started": "1"}))
    mine = FolderLock(lock, "arena watch")
    assert "no longer running" in (mine.acquire() or "")
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    try:
        FolderLock(lock, "arena watch").acquire()
    except ConfigError as exc:
        assert f"owned by another arena watch: process {os.getpid()}" in str(exc)
    else:
        raise AssertionError("a live owner's lock was taken")
    mine.release()
    assert not lock.exists()


def test_unreadable_checks_each_shard_the_index_lists(tmp_path: Path) -> None:
    from arena.checkpoint_files import unreadable

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}))
    _safetensors(folder / "s1.safetensors", 8)
    _safetensors(folder / "s2.safetensors", 8)
    assert unreadable(folder) is None
    whole = (folder / "s2.safetensors").read_bytes()
    (folder / "s2.safetensors").write_bytes(whole[:-8])
    assert unreadable(folder).startswith("ckpt/model.safetensors.index.json: its shard s2.safetensors is truncated")
