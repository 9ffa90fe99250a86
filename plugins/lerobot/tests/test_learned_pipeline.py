"""The learned-policy example (examples/lerobot_learned/run.py), CI-sized: record -> export ->
train -> serve -> evaluate runs end to end, once per training seed, and writes every stage's
output.

Two expert episodes, five training steps with training seed 3 (not the default, so the test
sees ``--train-seeds`` reach ``lerobot-train --seed``), two evaluated episodes per policy: what
is proven is the chain (arena's recorded trajectories become a LeRobotDataset that
``lerobot-train`` trains on, the checkpoint it writes serves through ``arena serve lerobot`` and
``lerobot_remote`` with the adapter the dataset was exported with) and the summary, never a
success rate: five steps learn nothing. A second seed would cost another training and
evaluation (~25 s on a loaded 2-core machine); the loop over seeds is that one seed's stages
repeated, and the range over seeds is checked on its own (``test_learned_range_*``). The full
example's numbers are in the plugin README ("A learned policy, end to end").
"""

from __future__ import annotations

import importlib.util
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


def _run_py():
    """examples/lerobot_learned/run.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("lerobot_learned_run", EXAMPLE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_train_seeds_parse_and_bad_lists_exit_2(capsys):
    """``--train-seeds`` takes distinct integers >= 0 in the order given; anything else is a usage
    error (exit 2) before any stage runs."""
    run = _run_py()
    assert run.parse_seeds("0") == [0]
    assert run.parse_seeds("2,0,1") == [2, 0, 1]
    for bad in ("", "0,,1", "a", "0,0", "-1", "1.5"):
        with pytest.raises(SystemExit) as exc:
            run.main(["--train-seeds", bad])
        assert exc.value.code == 2, bad
        assert "--train-seeds" in capsys.readouterr().err


def test_learned_range_is_min_and_max_over_seeds():
    """The range printed and written to summary.json: lowest and highest learned success over the
    evaluated seeds (the zero run's numbers play no part); none before a seed is evaluated."""
    run = _run_py()

    def seed(n, success, episodes=50):
        learned = {"success": success, "episodes": episodes, "success_rate": success / episodes, "ci95": [0.0, 1.0]}
        zero = {"success": 50, "episodes": 50, "success_rate": 1.0, "ci95": [0.9, 1.0]}
        return {"seed": n, "runs": {"learned": learned, "zero": zero}}

    assert run.learned_range([]) is None
    spread = run.learned_range([seed(0, 43), seed(1, 35), seed(2, 40)])
    assert spread == {
        "seeds": 3, "success_min": 35, "success_max": 43, "rate_min": 0.7, "rate_max": 0.86, "episodes": [50],
    }  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_record_export_train_serve_evaluate(tmp_path):
    python = benchmark_python("lerobot", SETUP)
    out = tmp_path / "pipeline"
    result = subprocess.run(
        [sys.executable, str(EXAMPLE / "run.py"), "--out", str(out), "--episodes", "2", "--steps", "5",
         "--batch-size", "4", "--eval-episodes", "2", "--train-seeds", "3", "--lerobot-python", str(python)],
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

    # 3. train: lerobot-train's checkpoint of the last step, with its processors, trained with
    # the seed asked for
    from arena_lerobot.model import checkpoint_sha256

    summary = json.loads((out / "summary.json").read_text())
    assert summary["train_seeds"] == [3]
    assert list(summary["stages"]) == ["record", "export", "train seed=3", "evaluate seed=3"]
    assert all(stage["wall_s"] > 0 for stage in summary["stages"].values())
    assert summary["machine"]["lerobot"] and summary["machine"]["torch"]
    (entry,) = summary["seeds"]
    assert entry["seed"] == 3
    seed_dir = out / "seed3"
    checkpoint = seed_dir / "train" / "checkpoints" / "last" / "pretrained_model"
    assert entry["checkpoint"] == str(checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["type"] == "act" and config["chunk_size"] == 20
    assert set(config["input_features"]) == {"observation.state", "observation.environment_state"}
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "policy_preprocessor.json").is_file()
    assert (seed_dir / "train" / "checkpoints" / "000005").is_dir()
    assert json.loads((checkpoint / "train_config.json").read_text())["seed"] == 3

    # 4. serve + evaluate: both runs completed their two episodes, none an error; the learned
    # run was answered by the lerobot server with that checkpoint
    for run in ("learned", "zero"):
        run_result = json.loads((seed_dir / "evaluate" / run / "run_result.json").read_text())
        assert run_result["state"] == "completed", run_result
        assert run_result["episodes"] == 2 and run_result["counts"]["error"] == 0
        assert entry["runs"][run]["episodes"] == 2
        assert entry["runs"][run]["ci95"] == run_result["ci95"]
    learned = json.loads((seed_dir / "evaluate" / "learned" / "run_result.json").read_text())
    served = learned["model"]["server_metadata"]
    assert served["policy_type"] == "act" and served["checkpoint_sha256"] == checkpoint_sha256(checkpoint)
    zero = json.loads((seed_dir / "evaluate" / "zero" / "run_result.json").read_text())
    assert zero["model"] is None
    assert summary["learned_range"]["seeds"] == 1
    assert summary["learned_range"]["success_max"] == summary["seeds"][0]["runs"]["learned"]["success"]
    assert "learned (ACT)" in result.stdout and "95% Wilson CI" in result.stdout
