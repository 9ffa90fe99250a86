"""`arena watch`: new checkpoints evaluated in order, once each, resumable after a kill; `arena.evaluate()`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

import arena
from arena.testing.experiments import run_in_session
from arena.testing.sinks import read_events
from arena.watch import DEFAULT_PATTERN, Checkpoint, compile_pattern, fill, scan


def _experiment(tmp_path: Path, events: Path, episodes: int = 2, delay: float = 0.0) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({
        "tracking": {"rec": {"type": "arena.testing.sinks:RecordingSink", "path": str(events)}},
        "shared": {"rollout_limit": {"num_episodes": episodes, "max_episode_steps": 6}},
        "runs": {"toy": {"environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False, "step_delay_s": delay},
                         "policy": {"type": "random_action"}}},
    }))
    return path


def _watch(tmp_path: Path, ckpts: Path, exp: Path, out: Path, *extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "arena", "watch", str(ckpts), "--experiment", str(exp), "runs.toy.environment.task={checkpoint}",
            "--output-dir", str(out), "--settle", "1", "--poll", "0.2", *extra]
    return subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _write_checkpoint(ckpts: Path, name: str) -> None:
    (ckpts / name).mkdir(parents=True)
    (ckpts / name / "model.bin").write_bytes(os.urandom(1024))


def _state(out: Path) -> dict:
    try:
        return json.loads((out / "watch.json").read_text())["checkpoints"]
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def _until(predicate, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else "watch exited"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _until_gone(pgid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)


def _started_steps(events: Path) -> list[int]:
    return [e["step"] for e in read_events(events) if e["event"] == "experiment_started"]


def test_three_checkpoints_written_one_after_another_are_evaluated_in_order_once_each(tmp_path: Path) -> None:
    ckpts, out, events = tmp_path / "ckpts", tmp_path / "watch", tmp_path / "events.jsonl"
    ckpts.mkdir()
    (ckpts / "notes.txt").write_text("not a checkpoint")
    proc = _watch(tmp_path, ckpts, _experiment(tmp_path, events), out, "--max-evaluations", "3", "--pattern", r"ckpt_(?P<step>\d+)")
    try:
        for i, step in enumerate((100, 200, 300)):
            _write_checkpoint(ckpts, f"ckpt_{step}")
            _until(lambda: sum(c.get("state") == "done" for c in _state(out).values()) == i + 1, proc)
        assert proc.wait(timeout=120) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    state = _state(out)
    assert list(sorted(state, key=lambda n: state[n]["started_at"])) == ["ckpt_100", "ckpt_200", "ckpt_300"]
    assert all(c["exit_code"] == 0 for c in state.values())
    assert _started_steps(events) == [100, 200, 300]
    for name, entry in state.items():
        result = arena.ExperimentResult.read(entry["output_dir"])
        assert result.runs["toy"].n == 2
        records = [json.loads(line) for line in (Path(entry["output_dir"]) / "toy" / "episodes.jsonl").read_text().splitlines()]
        assert {r["task"] for r in records} == {str((ckpts / name).resolve())}  # the path entered the evaluation


def test_a_killed_watch_resumes_without_evaluating_one_twice(tmp_path: Path) -> None:
    ckpts, out, events = tmp_path / "ckpts", tmp_path / "watch", tmp_path / "events.jsonl"
    ckpts.mkdir()
    exp = _experiment(tmp_path, events, episodes=6, delay=0.1)
    proc = _watch(tmp_path, ckpts, exp, out, "--max-evaluations", "3")
    try:
        _write_checkpoint(ckpts, "step1")
        _until(lambda: _state(out).get("step1", {}).get("state") == "done", proc)
        _write_checkpoint(ckpts, "step2")
        _until(lambda: (out / "step2" / "toy" / "episodes.jsonl").exists(), proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole job, as a scheduler does
        proc.wait()
        _until_gone(proc.pid)
    assert _state(out)["step2"]["state"] == "running"
    proc = _watch(tmp_path, ckpts, exp, out, "--max-evaluations", "3")
    try:
        _until(lambda: _state(out).get("step2", {}).get("state") == "done", proc)
        _write_checkpoint(ckpts, "step3")
        assert proc.wait(timeout=240) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    state = _state(out)
    assert {n: c["state"] for n, c in state.items()} == {"step1": "done", "step2": "done", "step3": "done"}
    assert _started_steps(events) == [1, 2, 3]  # step2 was resumed, not started again
    records = [json.loads(line) for line in (out / "step2" / "toy" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["episode_index"] for r in records) == list(range(6))
    assert arena.ExperimentResult.read(out / "step2").runs["toy"].n == 6


def test_pattern_step_and_placeholders() -> None:
    pattern = compile_pattern(DEFAULT_PATTERN)
    assert pattern.fullmatch("model_v2_step3000.pt")["step"] == "3000"
    ckpt = Checkpoint("ckpt_7", Path("/c/ckpt_7"), 7)
    assert fill(["shared.server.checkpoint={checkpoint}", "runs.a.policy.seed={step}"], ckpt, "exp-watch-1") == [
        "shared.server.checkpoint=/c/ckpt_7", "runs.a.policy.seed=7", "tracking.step=7", 'tracking.label="ckpt_7"',
        'tracking.series="exp-watch-1"']


def test_scan_orders_by_step_not_by_name(tmp_path: Path) -> None:
    for name in ("ckpt_1000", "ckpt_200", "ckpt_30", "other"):
        (tmp_path / name).mkdir()
    names = [c.name for c in scan(tmp_path, compile_pattern(r"ckpt_(?P<step>\d+)"))]
    assert names == ["ckpt_30", "ckpt_200", "ckpt_1000"]


def test_watch_without_the_checkpoint_placeholder_is_a_config_error(tmp_path: Path) -> None:
    exp = _experiment(tmp_path, tmp_path / "e.jsonl")
    done = subprocess.run([sys.executable, "-m", "arena", "watch", str(tmp_path), "--experiment", str(exp)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "{checkpoint}" in done.stderr


def test_evaluate_returns_the_typed_result_of_arena_run(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    result = arena.evaluate(_experiment(tmp_path, events), overrides={"runs.toy.environment.task": "ckpt-9", "tracking.step": 9},
                            output_dir=tmp_path / "out")
    assert isinstance(result, arena.ExperimentResult) and result.exit_code == 0
    raw = json.loads((tmp_path / "out" / "experiment_result.json").read_text())
    assert result.runs["toy"].n == raw["runs"]["toy"]["n"] == 2
    assert result.success_rate == raw["overall"]["success_rate"]
    assert result.runs["toy"].ci95 == raw["runs"]["toy"]["ci95"] and result.report == tmp_path / "out" / "index.html"
    assert result.raw()["by_task"] == raw["by_task"]  # every other key kept
    assert _started_steps(events) == [9]


_FLAKY_ENV = '''
from pathlib import Path
from arena.testing.envs import ToyReachEnv


class FlakyEnv(ToyReachEnv):
    """Cannot be built while the checkpoint folder (its task) holds a file named `broken`;
    `broken_once` fails the first build only (the file is removed)."""

    def __init__(self, config, **kwargs):
        for marker in ("broken", "broken_once"):
            path = Path(config.task) / marker
            if path.exists():
                if marker == "broken_once":
                    path.unlink()
                raise RuntimeError("simulator could not be built: " + str(path))
        super().__init__(config, **kwargs)
'''


def test_a_failed_evaluation_is_recorded_retried_and_listed(tmp_path: Path) -> None:
    """Issue 38 item 5: a checkpoint whose simulator cannot be built is `failed` with its
    reason, tried again on the next pass (it passes once fixed), and one that stays broken is
    given up after 1 + --retries attempts, listed at the end; the watch exits 3."""
    ckpts, out, events = tmp_path / "ckpts", tmp_path / "watch", tmp_path / "events.jsonl"
    (tmp_path / "flaky_env.py").write_text(_FLAKY_ENV)
    exp = _experiment(tmp_path, events)
    data = yaml.safe_load(exp.read_text())
    data["runs"]["toy"]["environment"]["type"] = "flaky_env:FlakyEnv"
    data["runs"]["toy"]["environment"]["report_distance"] = True
    exp.write_text(yaml.safe_dump(data))
    ckpts.mkdir()
    _write_checkpoint(ckpts, "ckpt_100")
    _write_checkpoint(ckpts, "ckpt_200")
    (ckpts / "ckpt_100" / "broken_once").write_text("")  # fails once, then evaluates
    (ckpts / "ckpt_200" / "broken").write_text("")  # fails every time
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "arena", "watch", str(ckpts), "--experiment", str(exp), "runs.toy.environment.task={checkpoint}",
            "--output-dir", str(out), "--settle", "0.5", "--poll", "0.5", "--max-evaluations", "2", "--retries", "1",
            "--pattern", r"ckpt_(?P<step>\d+)", "--allow-import", "flaky_env"]
    code, output = run_in_session(argv, cwd=tmp_path, env=env, timeout_s=300)
    assert code == 3, output
    assert "arena watch: ckpt_100 (step 100) FAILED (exit 3, attempt 1): run toy:" in output, output
    assert "simulator could not be built" in output and "trying ckpt_100 again (attempt 2 of 2" in output
    state = _state(out)
    assert state["ckpt_100"]["state"] == "done" and state["ckpt_100"]["attempts"] == 2, state
    assert state["ckpt_200"]["state"] == "failed" and state["ckpt_200"]["attempts"] == 2, state
    assert "simulator could not be built" in state["ckpt_200"]["reason"]
    assert arena.ExperimentResult.read(out / "ckpt_100").runs["toy"].n == 2
    # printed as each ended, a summary table, the failure listed at the end
    k = arena.ExperimentResult.read(out / "ckpt_100").runs["toy"].k
    assert f"arena watch: ckpt_100 (step 100): toy {k}/2 = " in output, output
    tail = output[output.index("arena watch: summary"):]
    assert "ckpt_100" in tail and f"toy {k}/2" in tail or f"{k}/2 = " in tail, tail
    assert "FAILED ckpt_200 (step 200): run toy:" in tail and "after 2 attempt(s)" in tail, tail
    # the page: success rate and the episode metric against step, the failure listed
    page = (out / "index.html").read_text()
    assert "success rate against training step" in page and "distance against training step" in page
    assert "ckpt_200 (step 200)" in page and "<script" not in page


def test_an_unreadable_checkpoint_is_listed_as_failed_with_why_and_the_watch_goes_on(tmp_path: Path) -> None:
    """A truncated .npz is failed at once with its path and what is wrong (not NumPy's pickle
    message), not evaluated nor retried; the next is evaluated into a folder named without
    the extension; an evaluation an earlier watch recorded in an old-style folder
    (``ckpt_1.npz/``) is not redone."""
    import numpy as np

    ckpts, out, events = tmp_path / "ckpts", tmp_path / "watch", tmp_path / "events.jsonl"
    ckpts.mkdir()
    for step in (1, 2, 3):
        np.savez(ckpts / f"ckpt_{step}.npz", weights=np.arange(4096, dtype=np.float32))
    whole = (ckpts / "ckpt_2.npz").read_bytes()
    (ckpts / "ckpt_2.npz").write_bytes(whole[: len(whole) // 2])  # a copy cut short
    old = out / "ckpt_1.npz"  # evaluated by an earlier watch, whose folders kept the extension
    old.mkdir(parents=True)
    (out / "watch.json").write_text(json.dumps({"checkpoints": {"ckpt_1.npz": {
        "step": 1, "path": str((ckpts / "ckpt_1.npz").resolve()), "output_dir": str(old), "state": "done", "exit_code": 0,
        "attempts": 1, "reason": None}}}))
    argv = [sys.executable, "-m", "arena", "watch", str(ckpts), "--experiment", str(_experiment(tmp_path, events)),
            "runs.toy.environment.task={checkpoint}", "--output-dir", str(out), "--settle", "0.3", "--poll", "0.2",
            "--max-evaluations", "3", "--pattern", r"ckpt_(?P<step>\d+)\.npz"]
    code, output = run_in_session(argv, cwd=tmp_path, timeout_s=240)
    assert code == 3, output  # an evaluation failed for good
    assert "pickle" not in output, output
    said = f"arena watch: ckpt_2.npz FAILED, not evaluated: {(ckpts / 'ckpt_2.npz').resolve()} is unreadable: is not a whole zip archive"
    assert said in output and "truncated or corrupt" in output, output
    state = _state(out)
    assert state["ckpt_2.npz"]["state"] == "failed" and state["ckpt_2.npz"]["attempts"] == 0 and state["ckpt_2.npz"]["output_dir"] is None
    assert state["ckpt_2.npz"]["reason"].startswith("unreadable checkpoint ckpt_2.npz: is not a whole zip archive")
    assert state["ckpt_1.npz"]["output_dir"] == str(old) and "started_at" not in state["ckpt_1.npz"]  # not redone
    assert state["ckpt_3.npz"]["state"] == "done" and Path(state["ckpt_3.npz"]["output_dir"]).name == "ckpt_3"
    assert (out / "ckpt_3" / "experiment_result.json").exists() and (out / "ckpt_3.log").exists()
    assert _started_steps(events) == [3]
    tail = output[output.index("arena watch: summary"):]
    assert "FAILED ckpt_2.npz (step 2): unreadable checkpoint ckpt_2.npz: is not a whole zip archive" in tail, tail
    assert "; not evaluated" in tail, tail
    assert "unreadable checkpoint ckpt_2.npz" in (out / "index.html").read_text()


def test_unreadable_names_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    import numpy as np

    from arena.checkpoint_files import unreadable

    np.save(tmp_path / "a.npy", np.zeros((8, 8), np.float32))
    assert unreadable(tmp_path / "a.npy") is None
    (tmp_path / "cut.npy").write_bytes((tmp_path / "a.npy").read_bytes()[:-10])
    assert "cut.npy: is truncated: its header needs" in unreadable(tmp_path / "cut.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "holds Python objects" in unreadable(tmp_path / "obj.npy")
    (tmp_path / "empty.npz").write_bytes(b"")
    assert unreadable(tmp_path / "empty.npz") == "empty.npz: the file is empty (0 bytes)"
    (tmp_path / "marked").mkdir()
    (tmp_path / "marked" / "_SUCCESS").write_bytes(b"")  # an empty marker in a folder is fine
    assert unreadable(tmp_path / "marked") is None
    # a LeRobot-style checkpoint folder whose weights were cut short
    lerobot = tmp_path / "005000" / "pretrained_model"
    lerobot.mkdir(parents=True)
    (lerobot / "config.json").write_text(json.dumps({"type": "act"}))
    header = json.dumps({"w": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}}).encode()
    (lerobot / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(256))
    assert unreadable(tmp_path / "005000") is None
    (lerobot / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bytes(100))
    assert unreadable(tmp_path / "005000") == (
        f"005000/pretrained_model/model.safetensors: is truncated: its tensors need {8 + len(header) + 256} bytes, "
        f"the file has {8 + len(header) + 100}")
    (lerobot / "config.json").write_text("{not json")
    assert unreadable(tmp_path / "005000").startswith("005000/pretrained_model/config.json: is not valid JSON")
    (tmp_path / "new").mkdir()
    assert unreadable(tmp_path / "new") == "new/: the folder holds no file"


def test_output_folders_are_named_without_the_extension_and_kept_unique(tmp_path: Path) -> None:
    from arena.watch import output_name

    (tmp_path / "run.v2").mkdir()
    (tmp_path / "ckpt_1.npz").write_bytes(b"x")
    npz, pt = Checkpoint("ckpt_1.npz", tmp_path / "ckpt_1.npz", 1), Checkpoint("ckpt_1.pt", tmp_path / "ckpt_1.pt", 1)
    assert output_name(npz, set()) == "ckpt_1"
    assert output_name(pt, {"ckpt_1"}) == "ckpt_1_pt"
    assert output_name(pt, {"ckpt_1", "ckpt_1_pt"}) == "ckpt_1_pt-2"
    assert output_name(Checkpoint("ckpt_1.pt", tmp_path / "ckpt_1.pt", 1), set()) == "ckpt_1"
    assert output_name(Checkpoint("run.v2", tmp_path / "run.v2", 2), set()) == "run.v2"  # a folder's name as it is


def test_an_unreadable_checkpoint_rewritten_whole_is_checked_again(tmp_path: Path) -> None:
    import numpy as np

    from arena.watch import Watch

    ckpts = tmp_path / "ckpts"
    ckpts.mkdir()
    (ckpts / "ckpt_5.npz").write_bytes(b"PK\x03\x04 cut short")
    said: list[str] = []
    watch = Watch(ckpts, _experiment(tmp_path, tmp_path / "e.jsonl"), ["runs.toy.environment.task={checkpoint}"], tmp_path / "w",
                  settle_s=0.0, say=said.append)
    assert watch._ready() == [] and [c.name for c in watch._ready()] == ["ckpt_5.npz"]  # seen, then settled
    watch._start(watch._ready()[0])
    entry = watch.state.checkpoints["ckpt_5.npz"]
    assert entry["state"] == "failed" and entry["unreadable"] and not watch.running and not watch._retriable()
    assert watch._failed_for_good() == ["ckpt_5.npz"] and watch._ready() == []  # not retried while unchanged
    np.savez(ckpts / "ckpt_5.npz", weights=np.zeros(3))
    os.utime(ckpts / "ckpt_5.npz", (1, 1))  # another size and time
    assert watch._ready() == [] and "ckpt_5.npz" not in watch.state.checkpoints
    assert [c.name for c in watch._ready()] == ["ckpt_5.npz"]
    assert any("has changed since: checking it again" in line for line in said), said
