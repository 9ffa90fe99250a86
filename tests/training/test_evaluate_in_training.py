"""`arena.evaluate()` from a training loop (issue 39 item 1): the snippet of docs/tracking.md
(the README's training-loop path leads there) runs as printed; a training script gets a checkpoint's own rate, never one pooled with its baseline,
and a broken checkpoint raises instead of returning a number a loop would log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import arena
from arena.errors import EvaluationFailed
from arena.results.experiment_result import AmbiguousResult, ExperimentResult

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "evaluate_checkpoint.yaml"


def _docs_snippet() -> str:
    section = (REPO / "docs" / "tracking.md").read_text()
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _in_checkout_copy(tmp_path: Path) -> Path:
    """A working directory where `examples/` is the checkout's, outputs stay in tmp_path."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    return work


def test_documented_training_loop_runs_as_printed(tmp_path: Path) -> None:
    work = _in_checkout_copy(tmp_path)
    done = subprocess.run([sys.executable, "-c", _docs_snippet()], cwd=work, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    assert [line[0] for line in lines] == ["0", "5000"], done.stdout
    for step in (0, 5000):
        result = ExperimentResult.read(work / "evals" / f"step_{step}")
        # the printed rate is the checkpoint's own run, not a pool with the zero-action baseline
        printed = float(lines[0 if step == 0 else 1][1])
        assert printed == pytest.approx(result.runs["checkpoint"].success_rate)
        assert result.runs["checkpoint"].n == 6 and result.runs["zero"].n == 6
        assert result.evaluated == ["checkpoint"]


_TRAINING_SCRIPT = textwrap.dedent('''
    import json, os, sys
    import numpy as np
    import arena
    from arena.errors import EvaluationFailed

    out = {}
    good = os.path.abspath("ckpt_good.npz")
    np.savez(good, actions=np.full((60, 4), [0.0, 0.5, 0.0, 0.0], np.float32))
    broken = os.path.abspath("ckpt_broken.npz")
    with open(broken, "wb") as f:
        f.write(b"half a checkpoint")  # a checkpoint the training was killed while writing
    # a tracker too, from a script with no `if __name__ == "__main__"` guard: its sink's
    # process must not run this script again
    sink = {"type": "arena.testing.sinks:RecordingSink", "path": os.path.abspath("events.jsonl")}
    result = arena.evaluate("examples/evaluate_checkpoint.yaml", output_dir="evals/good",
                            overrides={"runs.checkpoint.policy.path": good, "tracking.step": 1, "tracking.rec": sink})
    out["good"] = {"rate": result.success_rate, "ci95": result.ci95, "ok": result.ok,
                   "run_rate": result.runs["checkpoint"].success_rate, "zero_rate": result.runs["zero"].success_rate}
    try:
        arena.evaluate("examples/evaluate_checkpoint.yaml", output_dir="evals/broken",
                       overrides={"runs.checkpoint.policy.path": broken, "tracking.step": 2})
        out["broken"] = "returned"
    except EvaluationFailed as exc:
        out["broken"] = {"message": str(exc), "failures": exc.failures,
                         "zero_n": exc.result.runs["zero"].n if exc.result else None}
    json.dump(out, sys.stdout)
''')


def test_training_script_gets_its_checkpoints_rate_and_a_broken_checkpoint_raises(tmp_path: Path) -> None:
    import json

    from arena.testing.sinks import read_events

    work = _in_checkout_copy(tmp_path)
    (work / "train.py").write_text(_TRAINING_SCRIPT)
    done = subprocess.run([sys.executable, "train.py"], cwd=work, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(done.stdout.strip().splitlines()) == 1, done.stdout  # the script ran once
    got = json.loads(done.stdout.strip().splitlines()[-1])
    events = read_events(work / "events.jsonl")
    assert [e["event"] for e in events].count("experiment_finished") == 1 and {e["step"] for e in events} == {1}
    good = got["good"]
    assert good["ok"] is True and good["rate"] == good["run_rate"] and good["ci95"][0] <= good["rate"] <= good["ci95"][1]
    broken = got["broken"]
    assert broken != "returned", "a broken checkpoint returned a result a training loop would log"
    assert "run 'checkpoint' failed" in broken["message"] and "ckpt_broken.npz" in broken["message"], broken
    assert "evals/broken" in broken["message"]
    assert broken["zero_n"] == 6  # the baseline ran; its numbers are still there, on the exception


def _result(runs: dict, roles: dict | None = None) -> ExperimentResult:
    full = {name: {"state": "completed", "n": n, "k": k, "success_rate": k / n, "ci95": [0.0, 1.0]} for name, (n, k) in runs.items()}
    return ExperimentResult.model_validate({"experiment": "e", "runs": full, "overall": {"n": 20, "k": 10, "success_rate": 0.5},
                                            "roles": roles or {}})


def test_no_pooled_headline_without_a_declared_policy_under_evaluation() -> None:
    both = _result({"expert": (10, 10), "zero": (10, 0)})
    with pytest.raises(AmbiguousResult, match=r"expert, zero.*role: evaluated"):
        _ = both.success_rate
    assert _result({"expert": (10, 10), "zero": (10, 0)}, {"expert": "evaluated", "zero": "baseline"}).success_rate == 1.0
    assert _result({"only": (10, 3)}).success_rate == pytest.approx(0.3)
    with pytest.raises(AmbiguousResult, match="several runs"):
        _ = _result({"a": (10, 1), "b": (10, 2)}, {"a": "evaluated", "b": "evaluated"}).success_rate


def test_a_role_that_is_not_one_is_a_config_error() -> None:
    from arena.config import load_experiment
    from arena.errors import ConfigError

    with pytest.raises(ConfigError, match=r"run 'zero'.*role.*evaluated, baseline"):
        load_experiment(EXAMPLE, ["runs.zero.role=policy"])
