"""The learned-policy example (examples/lerobot_learned/run.py), CI-sized: record -> export ->
train -> serve -> evaluate runs end to end and writes every stage's output.

Two expert episodes, five training steps, two evaluated episodes per policy: what is proven is
the chain (arena's recorded trajectories become a LeRobotDataset that ``lerobot-train`` trains
on, the checkpoint it writes serves through ``arena serve lerobot`` and ``lerobot_remote`` with
the adapter the dataset was exported with), never a success rate: five steps learn nothing.
The full example's numbers are in the plugin README ("A learned policy, end to end").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.testing.venvs import benchmark_python

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "lerobot_learned"
SETUP = "arena venv setup lerobot"


def _arena(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, cwd=cwd, timeout=240)


@pytest.mark.parametrize("name", ["record.yaml", "evaluate.yaml"])
def test_example_experiments_validate(name, tmp_path):
    """Both experiment files of the example are valid as shipped (plugins, keys, the policy)."""
    result = _arena("validate", str(EXAMPLE / name), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_run_py_refuses_a_non_empty_output_directory(tmp_path):
    """A second run into the same --out would mix two pipelines' files: exit 2, nothing run."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("x")
    result = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), "--out", str(tmp_path / "out"), "--lerobot-python", sys.executable],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not empty" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["keep"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_record_export_train_serve_evaluate(tmp_path):
    python = benchmark_python("lerobot", SETUP)
    out = tmp_path / "pipeline"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), "--out", str(out), "--episodes", "2", "--steps", "5",
         "--batch-size", "4", "--eval-episodes", "2", "--lerobot-python", str(python)],
        capture_output=True, text=True, cwd=tmp_path, timeout=840, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]

    # 1. record: two expert episodes, each with its trajectory file
    records = [json.loads(line) for line in (out / "record" / "expert" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r.get("trajectory") for r in records)
    assert all((out / "record" / "expert" / r["trajectory"]).is_file() for r in records)

    # 2. export: a LeRobotDataset with the adapter's features and every recorded frame
    info = json.loads((out / "dataset" / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 2
    assert info["total_frames"] == sum(r["steps"] for r in records)
    assert info["features"]["observation.state"]["shape"] == [4]
    assert info["features"]["observation.environment_state"]["shape"] == [39]
    assert info["features"]["action"]["shape"] == [4]

    # 3. train: lerobot-train's checkpoint of the last step, with its processors
    checkpoint = out / "train" / "checkpoints" / "last" / "pretrained_model"
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "act" and config["chunk_size"] == 20
    assert set(config["input_features"]) == {"observation.state", "observation.environment_state"}
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "policy_preprocessor.json").is_file()
    assert (out / "train" / "checkpoints" / "000005").is_dir()

    # 4. serve + evaluate: both runs completed their two episodes, none an error; the learned
    # run was answered by the lerobot server with that checkpoint
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["stages"]) == {"record", "export", "train", "evaluate"}
    for run in ("learned", "zero"):
        run_result = json.loads((out / "evaluate" / run / "run_result.json").read_text())
        assert run_result["state"] == "completed", run_result
        assert run_result["episodes"] == 2 and run_result["counts"]["error"] == 0
        assert summary["runs"][run]["episodes"] == 2
        assert summary["runs"][run]["ci95"] == run_result["ci95"]
    learned = json.loads((out / "evaluate" / "learned" / "run_result.json").read_text())
    from arena_lerobot.model import checkpoint_sha256

    served = learned["model"]["server_metadata"]
    assert served["policy_type"] == "act" and served["checkpoint_sha256"] == checkpoint_sha256(checkpoint)
    zero = json.loads((out / "evaluate" / "zero" / "run_result.json").read_text())
    assert zero["model"] is None
    assert "learned" in result.stdout and "95% CI" in result.stdout
