"""What a user sees of perturbations on the command line: `arena validate --list-overrides`,
`arena plugins --json` and `arena plan-episodes --levels` for a sweep."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest


def _arena(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=120)


def test_list_overrides_names_each_perturbation_with_unit_range_and_nominal(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text("runs:\n  a: {environment: {type: metaworld, task: reach-v3, cameras: true, perturbations: {image_noise: 5}},"
                   " policy: {type: zero_action}}\n")
    done = _arena("validate", str(exp), "--list-overrides")
    assert done.returncode == 0, done.stderr
    assert "runs.a.environment.perturbations.image_noise=5" in done.stdout
    assert "# perturbations of environment metaworld (runs.a.environment.perturbations.NAME=VALUE):" in done.stdout
    assert "#   camera_shift: m, range [-0.5, 0.5], nominal 0.0 (simulator)" in done.stdout
    assert "#   action_delay: control steps, range [0, 100], nominal 0 (generic)" in done.stdout


def test_plugins_json_lists_each_environments_simulator_perturbations():
    done = _arena("plugins", "--json")
    assert done.returncode == 0, done.stderr
    declared = json.loads(done.stdout)["perturbations"]
    kitchen = {p["name"]: p for p in declared["franka_kitchen"]}
    assert kitchen["object_mass"]["nominal"] == 1.0 and kitchen["object_mass"]["unit"] == "factor"
    assert declared["metaworld"] and "camera_rotate" in {p["name"] for p in declared["metaworld"]}


def test_plan_episodes_for_a_sweep_tests_each_level_at_holms_first_step():
    scipy_stats = pytest.importorskip("scipy.stats")
    done = _arena("plan-episodes", "--baseline", "0.9", "--detect", "-0.1", "--paired", "--discordant", "0.12",
                  "--levels", "5", "--json")
    assert done.returncode == 0, done.stderr
    sweep = json.loads(done.stdout)["sweep"]
    za, zb = scipy_stats.norm.ppf(1 - 0.05 / 5 / 2), scipy_stats.norm.ppf(0.8)
    connor = (za * math.sqrt(0.12) + zb * math.sqrt(0.12 - 0.01)) ** 2 / 0.01  # Connor (1987), eq. 3
    assert sweep["seeds_per_run"] == math.ceil(connor) and sweep["episodes_total"] == 6 * math.ceil(connor)
    assert sweep["per_test_confidence"] == pytest.approx(0.99)


def test_validate_takes_a_perturbations_override_and_names_it_in_the_error(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text("perturbations: {runs: [a], factors: {image_noise: [10]}}\n"
                   "runs:\n  a: {environment: {type: metaworld, task: reach-v3, cameras: true}, policy: {type: zero_action}}\n")
    done = _arena("validate", str(exp), "perturbations.factors.image_noise=[0,40]", "--list-runs")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{exp}: key perturbations.factors.image_noise: level '0' (0) leaves image_noise at 0.0" in done.stderr
    assert "(from override 'perturbations.factors.image_noise=[0,40]')" in done.stderr
