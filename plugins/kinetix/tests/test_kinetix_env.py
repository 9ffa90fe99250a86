"""The ``kinetix`` environment in its venv: equal to kinetix-env's own environment for the same
seed and level, one compile reused across levels, true to arena's Environment contract
(:func:`arena.testing.environments.check_environment_in_venv`), and runs end to end (``arena run``).

Needs the ``kinetix`` venv (``arena venv setup kinetix``; skipped without it, failed under CI).
Kinetix compiles its step for 25-90 s on a CPU: every process here shares one persistent JAX
compilation cache (``JAX_COMPILATION_CACHE_DIR``), so that is paid once per test session.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from arena.testing.environments import check_environment_in_venv
from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def kinetix_python():
    return benchmark_python("kinetix")


@pytest.fixture(scope="module", autouse=True)
def compile_cache(tmp_path_factory):
    """One JAX compilation cache for this module's processes (and the env workers they start)."""
    path = tmp_path_factory.mktemp("jax-cache")
    previous = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    else:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = previous


def test_matches_kinetix_envs_own_environment(kinetix_python):
    done = subprocess.run(
        [str(kinetix_python), "-m", "arena_kinetix.reference", "--level", "grasp_easy", "--seed", "3", "--steps", "30",
         "--other", "car_launch", "--pixels"],
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["same"], out  # observations, rewards and done bit for bit, every step
    assert out["steps"] >= 10 and out["state_shape"] == [1, 679]
    assert out["pixels_same"] and out["pixels_shape"] == [125, 125, 3]
    # another level with the same static parameters reuses the compiled step (no 25-90 s compile)
    assert out["other_level_first_step_s"] < 20, out


def test_the_environment_contract_holds_in_the_kinetix_venv():
    # arena.testing's conformance check, seeding across processes included; the level of the
    # reference test above, so the compiled step comes from the module's cache
    report = check_environment_in_venv(
        "kinetix", "arena_kinetix.env:KinetixEnvironment", {"task": "grasp_easy"}, steps=2, timeout_s=900
    )
    assert report["success_key"] == "success" and report["action_dim"] == 6
    assert report["observation"]["policy/state"] == [[2, 679], "float32"]
    assert report["observation"]["policy/distance"] == [[2, 1], "float32"]


def test_live_sweep_end_to_end(run_experiment, kinetix_python):
    env = {"type": "kinetix", "task": "car_launch", "python": str(kinetix_python)}
    runs = {
        "hill": {"environment": env, "policy": {"type": "kinetix_hill_climb"},
                 # RTC: s <= H - d for the 8-row chunks at d = 4
                 "execution": {"mode": "live", "execute_horizon": 4, "delay": {"steps": 0}}},
        "zero": {"environment": env, "policy": {"type": "zero_action"}},
    }
    exp = {
        "launch": {"backend": "local", "local": {"jobs": 2}},
        "shared": {"environment_builder": {"num_envs": 2, "seed": 0},
                   # short: what is checked is the sweep's wiring, not how well the hill climb does
                   "rollout_limit": {"num_episodes": 2, "max_episode_steps": 64}},
        "runs": runs,
        "matrix": {"runs": ["hill"], "axes": {"d": {"key": "execution.delay.steps", "values": {"d0": 0, "d4": 4}}}},
    }
    outcome = run_experiment(exp)
    assert outcome.exit_code == 0, outcome.explain()
    runs_out = outcome.result["runs"]
    assert set(runs_out) == {"hill.d0", "hill.d4", "zero"}
    for name in runs_out:
        records = outcome.episodes(name)
        assert len(records) == 2 and all(r["outcome"] in ("success", "failure", "timeout") for r in records)
        assert all(r["protocol"]["benchmark"] == "kinetix" and r["protocol"]["action_noise"] == 0.1 for r in records)
    assert runs_out["zero"]["k"] == 0
    (sweep,) = outcome.result["delay_sweeps"]
    assert [r["run"] for r in sweep["rows"]] == ["hill.d0", "hill.d4"]
