"""``arena run`` of ManiSkill3 tasks: envs in workers under the ``maniskill`` venv (one env per
worker on the CPU backend), arena's own interpreter running the rollout and the policies.

CI share (measured on the 2-core machine, README "CI time"): each run's workers take a few
seconds to build their ManiSkill env, a 50-step rgb episode a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.testing.venvs import benchmark_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def arena_run(path: Path, out: Path, *overrides: str) -> subprocess.CompletedProcess:
    benchmark_python("maniskill")
    return subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), *overrides],
        capture_output=True, text=True, timeout=900,
    )


def quick_runs(tmp_path: Path, suffix: str, episodes: int, **environment) -> Path:
    """examples/maniskill_quick.yaml with only its runs ending in ``suffix`` (``_zero``,
    ``_expert``), ``episodes`` of each (seeds 0..episodes-1; the example's 10 cost CI a minute
    each) and ``environment`` fields over the shared ones."""
    experiment = yaml.safe_load((EXAMPLES / "maniskill_quick.yaml").read_text())
    experiment["runs"] = {name: run for name, run in experiment["runs"].items() if name.endswith(suffix)}
    experiment["shared"]["rollout_limit"]["num_episodes"] = episodes
    experiment["shared"]["environment"].update(environment)
    path = tmp_path / f"quick{suffix}.yaml"
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    return path


def records(run_dir: Path) -> list:
    from arena.results.run_summary import collect_run_records

    return sorted(collect_run_records(run_dir), key=lambda r: r.episode_index)


def comparable(record) -> tuple:
    """What the same seed must reproduce: outcome, steps, return (bit for bit) and metrics."""
    return record.seed, record.outcome, record.steps, record.return_, record.metrics


@pytest.fixture(scope="module")
def zero_runs(tmp_path_factory):
    """The quick example's zero-action runs: PullCube-v1 and PushCube-v1, rgb 128 x 128,
    4 episodes each over 2 envs (2 workers), seed 0."""
    tmp = tmp_path_factory.mktemp("zero")
    result = arena_run(quick_runs(tmp, "_zero", episodes=4), tmp / "out")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return tmp / "out"


@pytest.mark.slow
def test_zero_actions_never_succeed_on_two_tasks_with_cameras_over_two_workers(zero_runs):
    for run, task in (("pull_cube_zero", "PullCube-v1"), ("push_cube_zero", "PushCube-v1")):
        recs = records(zero_runs / run)
        assert [r.seed for r in recs] == list(range(4)), run
        assert [r.outcome for r in recs] == ["timeout"] * 4, run
        assert all(r.steps == 50 for r in recs) and {r.env_id for r in recs} == {0, 1}
        protocol = recs[0].protocol
        assert protocol["suite"] == task and protocol["control_mode"] == "pd_joint_pos"
        assert protocol["cameras"] == ["base_camera_rgb"] and protocol["image_size"] == [128, 128]
        result = json.loads((zero_runs / run / "run_result.json").read_text())
        assert result["counts"]["success"] == 0 and result["episodes"] == 4


@pytest.mark.slow
def test_same_seed_reproduces_records_in_another_process_with_another_worker_count(tmp_path):
    """PickCube-v1, zero actions, state only: three episodes over 2 envs (2 workers), then again
    in a new `arena run` on 1 env (1 worker): the same outcomes, steps, returns bit for bit
    (rewards follow every contact of the arm's motion) and partial credit (is_grasped)."""
    experiment = {
        "shared": {"environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": 3}},
        "runs": {"pick_zero": {"environment": {"type": "maniskill", "task": "PickCube-v1", "obs_mode": "state"},
                               "policy": {"type": "zero_action"}}},
    }
    path = tmp_path / "pick.yaml"
    path.write_text(yaml.safe_dump(experiment))
    runs = []
    for num_envs in (2, 1):
        out = tmp_path / f"out{num_envs}"
        result = arena_run(path, out, f"runs.pick_zero.environment_builder.num_envs={num_envs}")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        runs.append(records(out / "pick_zero"))
    two, one = runs
    assert {r.env_id for r in two} == {0, 1} and {r.env_id for r in one} == {0}
    assert [comparable(r) for r in one] == [comparable(r) for r in two]
    assert len({r.return_ for r in two}) == 3  # distinct scenes, so the equality says something
    assert all(set(r.metrics) == {"is_grasped", "is_obj_placed"} for r in two)
    summary = json.loads((tmp_path / "out1" / "pick_zero" / "run_result.json").read_text())
    assert summary["metrics"]["is_grasped"]["mean"] == 0.0 and summary["metrics"]["is_grasped"]["episodes"] == 3
    # a boolean extra stays a boolean in the record and gets the success rate's interval (Wilson 0/3)
    assert all(r.metrics["is_grasped"] is False for r in two)
    grasped = summary["metrics"]["is_grasped"]
    assert grasped["method"] == "wilson" and grasped["ci_low"] == 0.0 and 0.5 < grasped["ci_high"] < 0.6


@pytest.mark.slow
def test_a_remote_policy_behind_arenas_server_drives_push_cube(tmp_path):
    """`arena run` starts `arena serve maniskill-push-cube` (the server task) and the client
    sends one request per step from the state observation; the controller solves seeds 0-9 here."""
    experiment = {
        "shared": {"environment_builder": {"num_envs": 2, "seed": 0}, "rollout_limit": {"num_episodes": 4}},
        "runs": {"push_remote": {
            "environment": {"type": "maniskill", "task": "PushCube-v1", "obs_mode": "state", "control_mode": "pd_ee_delta_pos"},
            "policy": {"type": "maniskill_push_cube_remote"},
        }},
    }
    path = tmp_path / "remote.yaml"
    path.write_text(yaml.safe_dump(experiment))
    result = arena_run(path, tmp_path / "out")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    recs = records(tmp_path / "out" / "push_remote")
    assert [r.outcome for r in recs] == ["success"] * 4
    assert all(r.latency and r.latency["requests"] == r.steps for r in recs)
    assert all(r.steps < 50 for r in recs)


@pytest.mark.slow
def test_motion_planning_expert_solves_both_quick_tasks(tmp_path):
    """The quick example's expert runs (``maniskill_motion_planner``, ManiSkill's planners on
    PullCube-v1 and PushCube-v1, 10/10 and 9/10 on seeds 0-9 in ManiSkill's own runs, 80 steps)
    on seeds 0-4: at least 4 of 5 each. The planner reads privileged state, not images: state
    observations here (the zero runs above cover the example's camera)."""
    result = arena_run(quick_runs(tmp_path, "_expert", episodes=5, obs_mode="state"), tmp_path / "out")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for run in ("pull_cube_expert", "push_cube_expert"):
        recs = records(tmp_path / "out" / run)
        assert [r.seed for r in recs] == list(range(5)) and not any(r.outcome == "error" for r in recs), run
        assert sum(r.outcome == "success" for r in recs) >= 4, [r.outcome for r in recs]
