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
            assert r["steps"] < 300 and r["metrics"]["coverage"] > 0.95 and r["metrics"]["max_reward"] == 1.0
    assert [r["outcome"] for r in zero] == ["timeout"] * 4 and all(r["steps"] == 300 for r in zero)
    for r in expert + zero:
        assert set(r["metrics"]) == {"coverage", "max_reward"}  # the best reward, named as lerobot-eval names it
        assert r["metrics"]["max_reward"] == pytest.approx(min(r["metrics"]["coverage"] / 0.95, 1.0))
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
        assert summary["max_reward"]["mean"] == pytest.approx(np.mean([r["metrics"]["max_reward"] for r in rows]))
        assert f"{run}: coverage" in result.stdout and f"{run}: max_reward" in result.stdout
        for key in ("coverage", "max_reward"):  # declared in [0, 1]: an interval inside it, never of zero width
            m = summary[key]
            assert m["method"] == "betting-bounded-mean" and m["bounds"] == [0.0, 1.0]
            assert 0.0 <= m["ci_low"] <= m["mean"] <= m["ci_high"] <= 1.0 and m["ci_high"] > m["ci_low"]
    expert_cov = json.loads((out / "pusht_expert" / "run_result.json").read_text())["metrics"]["coverage"]["mean"]
    zero_cov = json.loads((out / "pusht_zero" / "run_result.json").read_text())["metrics"]["coverage"]["mean"]
    assert expert_cov > 0.9 and zero_cov < 0.5
    report = (out / "index.html").read_text()
    assert "Episode metrics" in report and "coverage" in report
    # the run's figures under lerobot-eval's names too, computed as lerobot-eval computes them
    # (eval_policy's "aggregated": nanmean of sum_rewards and max_rewards, 100 x the success mean)
    experiment = json.loads((out / "experiment_result.json").read_text())["runs"]
    for run, rows in (("pusht_expert", expert), ("pusht_zero", zero)):
        named = experiment[run]["as_reported"]
        assert named["by"] == "lerobot-eval", named
        figures = named["figures"]
        assert figures["pc_success"]["mean"] == pytest.approx(100 * np.mean([r["outcome"] == "success" for r in rows]))
        assert figures["avg_sum_reward"]["mean"] == pytest.approx(np.mean([r["return"] for r in rows]))
        assert figures["avg_max_reward"]["mean"] == pytest.approx(np.mean([r["metrics"]["max_reward"] for r in rows]))
        for figure in figures.values():
            assert figure["ci_low"] <= figure["mean"] <= figure["ci_high"] and figure["episodes"] == len(rows)
        # on the console too, under those names
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"{run}: as lerobot-eval reports it: "))
        assert all(f"{name} {figures[name]['mean']:.3g}" in line for name in ("pc_success", "avg_sum_reward", "avg_max_reward")), line
    assert "Under the reference tool's names" in report and "avg_sum_reward" in report and "pc_success" in report


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


@pytest.mark.slow
def test_native_pusht_and_the_lerobot_bridge_play_the_same_episodes_and_compare_paired(tmp_path):
    """LeRobot's PushT through the native `pusht` and through the `lerobot_env` bridge, one
    experiment, the same seeds: per episode the same return, max_reward and coverage (the bridge
    reports the env's coverage too), and `arena compare` pairs the two runs without --force,
    their environments declaring the same episodes (docs/lerobot.md, "Native or bridge?")."""
    benchmark_python("pusht")
    benchmark_python("lerobot")
    shared = {"environment_builder": {"num_envs": 1, "seed": 1000},
              "rollout_limit": {"num_episodes": 2, "max_episode_steps": 12}}
    exp = tmp_path / "exp.yaml"
    exp.write_text(yaml.safe_dump({"shared": shared, "launch": {"local": {"jobs": 2}}, "runs": {
        "native": {"environment": {"type": "pusht", "obs_type": "pixels_agent_pos", "instruction": ""},
                   "policy": {"type": "zero_action"}},
        "bridge": {"environment": {"type": "lerobot_env", "env": {"type": "pusht"}}, "policy": {"type": "zero_action"}},
    }}))
    out = tmp_path / "out"
    run_arena(str(exp), "--output-dir", str(out))
    native, bridge = records(out, "native"), records(out, "bridge")
    assert [r["seed"] for r in native] == [r["seed"] for r in bridge] == [1000, 1001]
    for a, b in zip(native, bridge):
        assert set(a["metrics"]) == set(b["metrics"]) == {"coverage", "max_reward"}
        assert b["return"] == pytest.approx(a["return"], abs=1e-5) and b["steps"] == a["steps"]
        for key in ("coverage", "max_reward"):
            assert b["metrics"][key] == pytest.approx(a["metrics"][key], abs=1e-5)
        assert a["protocol"]["episodes_as"] == b["protocol"]["episodes_as"]
    done = subprocess.run([sys.executable, "-m", "arena", "compare", str(out), str(out), "--pair", "native:bridge"],
                          capture_output=True, text=True, timeout=300)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, said
    assert "paired" in said and "the same episodes behind two wrappers" in said, said
