"""The libero environment as arena's own interpreter sees it: no LIBERO installed, only the
task catalog. Validation, suite expansion, step limits and the expert's checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.config import list_overrides, load_experiment
from arena.errors import ConfigError
from arena_libero import catalog
from arena_libero.env import LiberoConfig, LiberoEnvironment

EXPERIMENT = """\
shared:
  environment: {type: libero, cameras: false}
  policy: {type: zero_action}
  rollout_limit: {num_episodes: 2}
runs:
  spatial: {environment: {suite: libero_spatial}}
  one_goal: {environment: {suite: libero_goal, task: open_the_middle_drawer_of_the_cabinet}}
"""


def test_standard_suites_have_their_task_counts_and_step_limits():
    counts = {s: len(catalog.tasks(s)) for s in catalog.STANDARD_SUITES}
    assert counts == {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90}
    limits = [catalog.step_limit(s) for s in catalog.STANDARD_SUITES]
    assert limits == [220, 280, 300, 520, 400]
    assert catalog.suites()[:5] == list(catalog.STANDARD_SUITES)


def test_pro_suites_with_complete_resources_are_listed_with_their_base_limit():
    pro = [s for s in catalog.suites() if s not in catalog.STANDARD_SUITES]
    assert len(pro) == 28 and "libero_spatial_swap" in pro and "libero_10_lan" in pro
    assert catalog.step_limit("libero_spatial_swap") == 220 and catalog.step_limit("libero_10_lan") == 520
    assert "libero_object_with_red_stick" not in pro  # its assets are missing from the package


def test_every_task_has_init_states_a_language_and_a_goal():
    for suite in catalog.suites():
        for task in catalog.tasks(suite):
            assert task.init_states in (10, 50) and task.language and task.goal, (suite, task.index)
    assert all(t.init_states == 50 for s in catalog.STANDARD_SUITES for t in catalog.tasks(s))


@pytest.mark.parametrize("given", [0, "0", "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate",
                                   "pick up the black bowl between the plate and the ramekin and place it on the plate"])
def test_task_by_index_name_or_instruction(given):
    config = LiberoConfig(suite="libero_spatial", task=given)
    assert config.task == 0
    assert config.selected_task().goal == (("on", "akita_black_bowl_1", "plate_1"),)


def test_unknown_suite_and_task_name_the_closest_and_the_range(tmp_path):
    with pytest.raises(ValueError, match="did you mean libero_spatial"):
        LiberoConfig(suite="libero_spatail")
    with pytest.raises(ValueError, match=r"tasks 0\.\.9; got 10"):
        LiberoConfig(suite="libero_object", task=10)
    path = tmp_path / "bad.yaml"
    path.write_text(EXPERIMENT.replace("open_the_middle_drawer_of_the_cabinet", "open_the_midle_drawer"))
    with pytest.raises(ConfigError) as err:
        load_experiment(path)
    assert "one_goal" in str(err.value) and "environment" in str(err.value)
    assert "did you mean open_the_middle_drawer_of_the_cabinet" in str(err.value)


def test_a_suite_without_task_expands_into_one_run_per_task(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    assert list(experiment.runs) == [f"spatial.{i}" for i in range(10)] + ["one_goal"]
    assert experiment.runs["spatial.7"].environment.task == 7
    assert experiment.runs["one_goal"].environment.task == catalog.find_task("libero_goal", "open_the_middle_drawer_of_the_cabinet").index
    keys = dict(list_overrides(experiment))
    assert keys["runs.spatial.3.environment.task"] == 3 and keys["runs.spatial.3.environment.num_steps_wait"] == 10


def test_dry_run_and_list_overrides_show_the_task_runs(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    runner = CliRunner()
    dry = runner.invoke(app, ["run", str(path), "--dry-run", "runs.spatial.9.rollout_limit.num_episodes=5"])
    assert dry.exit_code == 0, dry.output
    assert re.search(r"^    spatial\.0 +libero_spatial/pick_up_the_black_bowl_between", dry.output, re.M), dry.output
    assert "  run spatial.9: libero libero_spatial/" in dry.output and "5 episodes" in dry.output
    listed = runner.invoke(app, ["run", str(path), "--list-overrides", "runs.spatial.9.rollout_limit.num_episodes=5"])
    assert listed.exit_code == 0, listed.output
    assert "runs.spatial.9.rollout_limit.num_episodes=5" in listed.output
    assert "runs.spatial.8.rollout_limit.num_episodes=2" in listed.output


def test_step_limit_defaults_per_suite_and_is_overridable():
    assert LiberoConfig(suite="libero_10", task=0).max_episode_steps is None
    # The instance's default is set from the suite when envs are built; the class knows the rule.
    assert catalog.step_limit(LiberoConfig(suite="libero_object", task=0).suite) == 280
    assert LiberoConfig(suite="libero_object", task=0, max_episode_steps=50).max_episode_steps == 50


def test_records_name_the_suite_and_task():
    assert LiberoConfig(suite="libero_goal", task=2).task_name() == "libero_goal/" + catalog.tasks("libero_goal")[2].name


def test_expert_refuses_tasks_whose_goal_is_not_one_placement(tmp_path):
    goal = catalog.find_task("libero_10", 0).goal
    assert len(goal) > 1  # libero_10 tasks are two-step
    path = tmp_path / "exp.yaml"
    path.write_text(
        "runs:\n  long:\n    environment: {type: libero, suite: libero_10, task: 0}\n"
        "    policy: {type: libero_pick_place_expert}\n"
    )
    with pytest.raises(ConfigError, match="handles one On/In goal"):
        load_experiment(path)


def test_cli_lists_suites_and_tasks():
    def arena(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=120)

    suites = arena("libero", "tasks")
    assert suites.returncode == 0 and "libero_spatial\t10 tasks\t220 steps" in suites.stdout, suites.stderr
    tasks = arena("libero", "tasks", "libero_object")
    assert tasks.returncode == 0 and tasks.stdout.splitlines()[0].startswith("0\tpick_up_the_alphabet_soup")
    unknown = arena("libero", "tasks", "libero_nope")
    assert unknown.returncode == 2 and "unknown LIBERO suite 'libero_nope'" in unknown.stderr


def test_environment_declares_its_success_key_and_venv():
    assert LiberoEnvironment.success_key == "success" and LiberoEnvironment.default_venv.name == "libero"


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(
    "backend, extra",
    [
        ("local", []),
        ("slurm", []),
        ("osmo", ["launch.osmo.pool=h100", "launch.osmo.platforms={h100: {dgx: {gpu_type: H100, gpus: 8, gpu_memory_gb: 80, memory_gb: 2048, cpus: 224}}}"]),
    ],
)
def test_pi05_example_dry_runs_every_task_of_four_suites_on_every_backend(backend, extra, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(EXAMPLES / "libero_pi05.yaml"), "--dry-run", "--backend", backend, *extra],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # a Slurm dry-run writes its scripts to a temporary directory
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for run in ("spatial.0", "object.9", "goal.4", "long.9"):
        assert run in done.stdout or run.replace(".", "-") in done.stdout, run
    # Slurm and OSMO write their job scripts / workflows there
    scripts = "".join(p.read_text() for p in tmp_path.glob("arena-dry-run-*/*") if p.is_file())
    assert "pi05_libero" in done.stdout + scripts


def test_quick_example_validates_with_the_expert_and_zero_actions():
    done = subprocess.run(
        [sys.executable, "-m", "arena", "validate", str(EXAMPLES / "libero_quick.yaml")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "4 run(s): bowl_on_plate_expert, bowl_on_plate_zero, next_bowl_expert, next_bowl_zero" in done.stdout
