"""What arena says must be what happened (issue 39 items 5 and 6): an override that changes no
run warns naming the runs; the console shows the stopping decision and the interval valid
after it; `arena compare` names the field that differs between two runs' models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rich.console import Console

from arena.config import load_experiment
from arena.results.labels import model_differences, models_differ
from arena.results.compare import notes

REPO = Path(__file__).resolve().parents[2]


def test_an_override_every_run_sets_itself_warns_naming_the_runs(tmp_path: Path) -> None:
    pusht = REPO / "examples" / "pusht.yaml"
    done = subprocess.run([sys.executable, "-m", "arena", "validate", str(pusht), "shared.environment={obs_type: pixels_agent_pos}"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stderr.split())
    assert ("warning: override 'shared.environment={obs_type: pixels_agent_pos}' changes nothing: every run sets "
            "environment.obs_type itself (runs pusht_expert, pusht_zero)") in text, done.stderr
    assert "runs.pusht_expert.environment.obs_type=" in text
    # overrides that reach a run do not warn; nor does one that some run takes
    assert load_experiment(pusht, ["shared.rollout_limit.num_episodes=3"]).warnings == []
    quick = REPO / "examples" / "quickstart.yaml"
    assert load_experiment(quick, ["shared.environment_builder.seed=5"]).warnings == []
    assert [w for w in load_experiment(quick, ["shared.environment.task=push-v3"]).warnings if "environment.task" in w]


def test_console_summary_shows_the_stop_and_the_interval_valid_after_it(tmp_path: Path) -> None:
    from arena.launch.submit import run_experiment
    from arena.testing.experiments import tiny_experiment
    from arena.config import load_experiment_dict
    import json

    exp = tiny_experiment({"type": "zero_action"}, episodes=30, max_episode_steps=4, num_envs=2, run="zero")
    exp["runs"]["zero"]["rollout_limit"]["stop_when"] = {"threshold": 0.5}
    console = Console(record=True, width=250)
    assert run_experiment(load_experiment_dict(exp, source="stop.yaml"), output_dir=tmp_path / "out", console=console) == 0
    text = console.export_text()
    run = json.loads((tmp_path / "out" / "experiment_result.json").read_text())["runs"]["zero"]
    stop = run["stop"]
    assert stop["decision"] == "below" and stop["episodes_used"] < 30
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("zero"))
    assert f"stop_when: below 50% after {stop['episodes_used']} episodes" in row, text
    low, high = stop["sequence_ci"]
    assert f"{100 * low:.0f}–{100 * high:.0f}%" in row, row  # the sequence's interval, not Wilson's
    wilson = run["ci95"]
    assert f"{100 * wilson[0]:.0f}–{100 * wilson[1]:.0f}%" not in row


def _run(checkpoint: str, n_action_steps: int) -> dict:
    return {"policy": {"type": "lerobot_remote"},
            "model": {"checkpoint": checkpoint, "revision": None, "image": None, "image_digest": None,
                      "server_metadata": {"model": "lerobot", "n_action_steps": n_action_steps}}}


def test_compare_names_the_field_that_differs_not_different_models() -> None:
    a, b = _run("/c/act", 10), _run("/c/act", 20)
    assert models_differ(a, b) == ["server_metadata.n_action_steps"]
    row = {"run": "learned", "design": "paired", "design_reason": "same seeds", "ci_method": "newcombe_paired",
           "models_differ": models_differ(a, b), "model_differences": model_differences(a, b)}
    lines = " ".join(notes({"runs": [row]}))
    assert "the same model was served with different settings: server_metadata.n_action_steps (A 10, B 20)" in lines
    assert "different models" not in lines
    other = _run("/c/other", 10)
    row |= {"models_differ": models_differ(a, other), "model_differences": model_differences(a, other)}
    assert "served by different models: checkpoint (A '/c/act', B '/c/other')" in " ".join(notes({"runs": [row]}))
