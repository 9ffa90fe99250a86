"""``arena run`` on PushT: envs in workers under the PushT venv, arena's own interpreter running
the rollout and the policies; coverage recorded per episode and summarized per run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from arena.testing.venvs import benchmark_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def run_arena(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "arena", "run", *args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def records(out: Path, run: str) -> list[dict]:
    lines = (out / run / "episodes.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["episode_index"])


@pytest.mark.slow
def test_example_expert_solves_pusht_zero_actions_do_not_and_coverage_is_recorded(tmp_path):
    """examples/pusht.yaml as a user runs it: seeds 0-19 for the expert (measured 20/20), four
    episodes of zero actions (each a full 300-step timeout)."""
    benchmark_python("pusht")
    out = tmp_path / "out"
    result = run_arena(str(EXAMPLES / "pusht.yaml"), "--output-dir", str(out), "runs.pusht_zero.rollout_limit.num_episodes=4")
    expert, zero = records(out, "pusht_expert"), records(out, "pusht_zero")
    assert [r["seed"] for r in expert] == list(range(20)) and [r["seed"] for r in zero] == [0, 1, 2, 3]
    successes = sum(r["outcome"] == "success" for r in expert)
    assert successes >= 18, [r["outcome"] for r in expert]  # 20/20 measured on gym-pusht 0.1.8, pymunk 6.11
    for r in expert:
        if r["outcome"] == "success":
            assert r["steps"] < 300 and r["metrics"]["coverage"] > 0.95 and r["metrics"]["reward"] == 1.0
    assert [r["outcome"] for r in zero] == ["timeout"] * 4 and all(r["steps"] == 300 for r in zero)
    for r in expert + zero:
        assert set(r["metrics"]) == {"coverage", "reward"}
        assert r["metrics"]["reward"] == pytest.approx(min(r["metrics"]["coverage"] / 0.95, 1.0))
        assert r["protocol"]["benchmark"] == "pusht" and r["protocol"]["suite_version"] == "0.1.8"
        assert r["protocol"]["obs_type"] == "state" and r["protocol"]["step_limit"] == 300
    # The same seed is the same episode in both runs.
    assert [r["env_extras"]["initial_state"] for r in expert[:4]] == [r["env_extras"]["initial_state"] for r in zero]
    # The run's summary: the mean of the episodes' values, with its interval, in run_result.json,
    # on the console and in the report.
    for run, rows in (("pusht_expert", expert), ("pusht_zero", zero)):
        summary = json.loads((out / run / "run_result.json").read_text())["metrics"]
        assert summary["coverage"]["episodes"] == len(rows)
        assert summary["coverage"]["mean"] == pytest.approx(np.mean([r["metrics"]["coverage"] for r in rows]))
        assert summary["reward"]["mean"] == pytest.approx(np.mean([r["metrics"]["reward"] for r in rows]))
        assert f"{run}: coverage" in result.stdout and f"{run}: reward" in result.stdout
        for key in ("coverage", "reward"):  # declared in [0, 1]: an interval inside it, never of zero width
            m = summary[key]
            assert m["method"] == "betting-bounded-mean" and m["bounds"] == [0.0, 1.0]
            assert 0.0 <= m["ci_low"] <= m["mean"] <= m["ci_high"] <= 1.0 and m["ci_high"] > m["ci_low"]
    expert_cov = json.loads((out / "pusht_expert" / "run_result.json").read_text())["metrics"]["coverage"]["mean"]
    zero_cov = json.loads((out / "pusht_zero" / "run_result.json").read_text())["metrics"]["coverage"]["mean"]
    assert expert_cov > 0.9 and zero_cov < 0.5
    report = (out / "index.html").read_text()
    assert "Episode metrics" in report and "coverage" in report


def _random_pixels_runs(tmp_path: Path, workers: dict[str, int]) -> dict[str, list[dict]]:
    """One ``arena run`` of one run per ``{name: env worker count}``: random actions on pixels,
    3 envs, 5 episodes of 25 steps from seed 40. Returns each run's records."""
    body = {
        "policy": {"type": "random_action", "seed": 3},
        "environment_builder": {"num_envs": 3, "seed": 40},
        "rollout_limit": {"num_episodes": 5, "max_episode_steps": 25},
    }
    experiment = {
        "runs": {
            name: {"environment": {"type": "pusht", "obs_type": "pixels_agent_pos", "workers": n}, **body}
            for name, n in workers.items()
        }
    }
    path = tmp_path / "push.yaml"
    path.write_text(yaml.safe_dump(experiment))
    run_arena(str(path), "--output-dir", str(tmp_path / "out"))
    return {name: records(tmp_path / "out", name) for name in workers}


@pytest.mark.slow
def test_episodes_depend_on_their_seed_only_not_on_the_worker_layout(tmp_path):
    """Random actions on pixels: episode i has seed 40 + i, and one worker per env gives the
    same episodes (initial state, return, coverage) as all envs in one worker process."""
    benchmark_python("pusht")
    runs = _random_pixels_runs(tmp_path, {"one": 1, "three": 3})  # one arena start for both layouts
    one, three = runs["one"], runs["three"]
    assert [r["seed"] for r in one] == [40, 41, 42, 43, 44]

    def episodes(rows):
        return {r["seed"]: (r["env_extras"]["initial_state"], r["return"], r["steps"], r["metrics"]) for r in rows}

    assert episodes(one) == episodes(three)
    assert len({tuple(r["env_extras"]["initial_state"]) for r in one}) == 5
    assert one[0]["protocol"]["image_size"] == [96, 96]
