"""`arena export lerobot`: a real Meta-World run recorded by `arena run`, exported, loaded back
with LeRobot's `LeRobotDataset` (in the lerobot venv), frame by frame equal to the records.

The round trip needs the `lerobot` model venv (`arena venv setup lerobot`; skipped with that
command when it is absent, a failure under CI); the error cases need only arena. The videos
case also needs Debian's FFmpeg libraries for decoding (`make test` installs them as root: `scripts/setup-system.sh`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("metaworld")

TESTS = Path(__file__).resolve().parent
STANDIN = "standin_adapter:StandInAdapter"
#: What a Meta-World run is exported with by default: the plugin's adapter, as lerobot-eval feeds
#: LeRobot's Meta-World env (observation.image, 4-dim agent_pos state, LeRobot's task wording).
METAWORLD = "lerobot/metaworld"
#: Mean absolute difference per image (0..255) allowed between a video-decoded frame and the
#: recorded one: LeRobot encodes AV1 (libsvtav1, crf 30, yuv420p) — lossy, chroma subsampled
#: 2x2. Measured on these 64x64 Meta-World frames: worst frame 4.3 (single pixels at edges up
#: to 176); 5.1 on 32x32 ones. check_export.py also holds each decoded frame closer to its own
#: recorded frame than to the next one (no frame shifted).
VIDEO_TOLERANCE = 8.0

EXPERIMENT = {
    "shared": {
        "environment": {"type": "metaworld", "task": "reach-v3", "cameras": True, "image_size": 64},
        # one env: Meta-World renders every env's camera at every step, idle ones too
        "environment_builder": {"num_envs": 1, "seed": 0},
    },
    "runs": {
        # Meta-World's expert reaches the goal in 74 steps on seed 0 and in 39 on seeds 1 and
        # 2: with 40 steps, a timeout and two successes (118 frames, ~0.1-0.4 s each to render)
        "expert": {
            "policy": {"type": "metaworld_expert_remote"},
            "rollout_limit": {"num_episodes": 3, "max_episode_steps": 40},
            "trajectories": {"enabled": True},
        },
    },
}
#: What the error cases need: a run with trajectories and one without (no camera, 3 steps).
SMALL = {
    "shared": {
        "environment": {"type": "metaworld", "task": "reach-v3"},
        "environment_builder": {"num_envs": 1, "seed": 0},
        "rollout_limit": {"num_episodes": 2, "max_episode_steps": 3},
        "policy": {"type": "zero_action"},
    },
    "runs": {"zero": {"trajectories": {"enabled": True}}, "plain": {}},
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(TESTS)  # the stand-in adapter, for the venv's interpreter too
    env.update(extra)
    return env


def _arena(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "arena", *args], capture_output=True, text=True, timeout=timeout, env=env or _env()
    )


def _run(root: Path, experiment: dict) -> Path:
    path = root / "exp.yaml"
    path.write_text(yaml.safe_dump(experiment, sort_keys=False))
    out = root / "out"
    done = _arena("run", str(path), "--output-dir", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """One `arena run` of EXPERIMENT (the expert, a camera): its output directory."""
    return _run(tmp_path_factory.mktemp("export"), EXPERIMENT)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """One `arena run` of SMALL: its output directory."""
    return _run(tmp_path_factory.mktemp("export-small"), SMALL)


def _records(out: Path, run: str) -> list[dict]:
    return [json.loads(line) for line in (out / run / "episodes.jsonl").read_text().splitlines()]


def _lerobot_python() -> Path:
    from arena.venvs import venv_python

    python = venv_python("lerobot")
    if python.exists():
        return python
    message = f"the lerobot venv ({python}) does not exist: run `arena venv setup lerobot`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


#: The module's exports of ``recorded``'s run ``expert``: name -> (``arena export lerobot`` args
#: after ``--to DIR``, repo id, adapter, tolerance of check_export.py).
EXPORTS = {
    "ds": ((), "local/expert", METAWORLD, 0.0),  # PNG images: exact
    "failures": (("--adapter", STANDIN, "--failed-only", "--repo-id", "local/failures", "--fps", "20"), "local/failures",
                 STANDIN, 0.0),
    "videos": (("--videos",), "local/expert", METAWORLD, VIDEO_TOLERANCE),
}


@pytest.fixture(scope="module")
def exports(recorded, tmp_path_factory) -> dict[str, tuple[Path, subprocess.CompletedProcess, dict | None]]:
    """Each export of EXPORTS (``videos`` only where FFmpeg's libraries are), then every exported
    dataset loaded back by one check_export.py process in the lerobot venv (one LeRobot import):
    name -> (dataset, the export's finished process, check_export's ``{"summary"}`` or
    ``{"error"}``, None when the export failed)."""
    python = _lerobot_python()
    root = tmp_path_factory.mktemp("exports")
    exported = {}
    for name, (args, _, _, _) in EXPORTS.items():
        if name == "videos" and not _ffmpeg_libraries():
            continue
        dataset = root / name
        exported[name] = (dataset, _arena("export", "lerobot", str(recorded), "--run", "expert", "--to", str(dataset), *args))
    jobs = [[str(dataset), EXPORTS[name][1], str(recorded / "expert"), EXPORTS[name][2], EXPORTS[name][3]]
            for name, (dataset, done) in exported.items() if done.returncode == 0]
    (root / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run([str(python), str(TESTS / "check_export.py"), "--many", str(root / "jobs.json")],
                          capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stdout + done.stderr
    checks = iter(json.loads(done.stdout.splitlines()[-1]))
    return {name: (dataset, run, next(checks) if run.returncode == 0 else None) for name, (dataset, run) in exported.items()}


def _checked(exports, name: str) -> tuple[Path, subprocess.CompletedProcess, dict]:
    """Export ``name``: its dataset, its export's process (asserted successful) and
    check_export.py's summary (asserted: every frame equal to the records)."""
    dataset, done, check = exports[name]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error" not in check, check["error"]
    return dataset, done, check["summary"]


@pytest.mark.slow
def test_the_run_recorded_a_failure_and_a_success(recorded):
    outcomes = {r["outcome"] for r in _records(recorded, "expert")}
    assert "success" in outcomes and outcomes & {"failure", "timeout"}, outcomes
    assert all(r["trajectory"] for r in _records(recorded, "expert"))


@pytest.mark.slow
def test_export_round_trip_frames_equal_the_records(recorded, exports):
    dataset, done, checked = _checked(exports, "ds")
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["adapter"] == METAWORLD  # by the environment type
    records = sorted(_records(recorded, "expert"), key=lambda r: r["episode_index"])
    assert summary["episodes"] == len(records) and summary["frames"] == sum(r["steps"] for r in records)
    assert summary["repo_id"] == "local/expert" and summary["videos"] is False
    assert summary["fps"] == 80  # LeRobot's Meta-World env config
    assert checked["task"] == "Reach a goal position"  # not arena's instruction: LeRobot's wording, as served
    assert checked["episode_indices"] == [r["episode_index"] for r in records]
    assert checked["outcomes"] == [r["outcome"] for r in records]
    assert checked["image_keys"] == ["observation.image"] and checked["video_keys"] == []
    side = [json.loads(line) for line in (dataset / "meta" / "arena_episodes.jsonl").read_text().splitlines()]
    assert [(s["seed"], s["outcome"], s["steps"]) for s in side] == [(r["seed"], r["outcome"], r["steps"]) for r in records]


@pytest.mark.slow
def test_failed_only_exports_only_the_failures(recorded, exports):
    _, _, checked = _checked(exports, "failures")  # --adapter STANDIN --failed-only --repo-id local/failures --fps 20
    failed = [r["episode_index"] for r in sorted(_records(recorded, "expert"), key=lambda r: r["episode_index"])
              if r["outcome"] in ("failure", "timeout")]
    assert checked["episode_indices"] == failed and set(checked["outcomes"]) <= {"failure", "timeout"}
    assert checked["fps"] == 20 and checked["image_keys"] == ["observation.images.corner"]  # the stand-in's names


def _ffmpeg_libraries() -> bool:
    done = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
    return "libavutil.so." in done.stdout


@pytest.mark.slow
def test_export_with_videos_decodes_close_to_the_records(recorded, exports):
    if not _ffmpeg_libraries():
        message = "decoding LeRobot videos needs Debian's FFmpeg: run once: sudo scripts/setup-system.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    dataset, _, checked = _checked(exports, "videos")
    assert list((dataset / "videos").rglob("*.mp4"))
    assert checked["video_keys"] == ["observation.image"]
    assert checked["frames"] == sum(r["steps"] for r in _records(recorded, "expert"))
    # lossy, yet close: the measured error stays well inside the tolerance
    assert checked["mean_abs_diff"]["observation.image"] <= VIDEO_TOLERANCE, checked


def test_a_bad_run_name_lists_the_runs(small, tmp_path):
    done = _arena("export", "lerobot", str(small), "--run", "nope", "--to", str(tmp_path / "ds"))
    assert done.returncode == 2
    assert f"{small} has no run 'nope' (runs: zero, plain)" in done.stderr
    assert not (tmp_path / "ds").exists()


def test_a_run_without_trajectories_says_how_to_record_them(small, tmp_path):
    done = _arena("export", "lerobot", str(small), "--run", "plain", "--to", str(tmp_path / "ds"))
    assert done.returncode == 2
    assert "run 'plain'" in done.stderr and "recorded no trajectories" in done.stderr
    assert "trajectories.enabled=true" in done.stderr


def test_an_existing_target_is_refused(small, tmp_path):
    target = tmp_path / "taken"
    target.mkdir()
    done = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(target))
    assert done.returncode == 2 and f"{target} exists already" in done.stderr
    assert list(target.iterdir()) == []


def test_without_the_lerobot_venv_it_names_the_set_up_command(small, tmp_path):
    done = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(tmp_path / "ds"), "--adapter", STANDIN,
                  env=_env(ARENA_VENVS=str(tmp_path / "no-venvs")))
    assert done.returncode == 2, done.stderr
    assert "arena venv setup lerobot" in done.stderr and str(tmp_path / "no-venvs" / "lerobot") in done.stderr
    assert not (tmp_path / "ds").exists()


def test_an_unknown_adapter_is_refused_before_anything_is_written(small, tmp_path):
    done = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(tmp_path / "ds"),
                  "--adapter", "lerobot/no-such-embodiment")
    assert done.returncode == 2 and "adapter 'lerobot/no-such-embodiment'" in done.stderr
    assert not (tmp_path / "ds").exists()


def test_recordings_of_another_robot_do_not_fit_the_adapter(small, tmp_path):
    done = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(tmp_path / "ds"),
                  "--adapter", "standin_adapter:FourteenDimAdapter")
    assert done.returncode == 2, done.stderr
    assert "episode 0 (ep00000_seed0_timeout.npz) does not fit adapter standin_adapter:FourteenDimAdapter" in done.stderr
    assert "(H, 14)" in done.stderr and not (tmp_path / "ds").exists()


def test_the_adapter_and_fps_default_to_the_environment_types_lerobot_embodiment(small, tmp_path, monkeypatch):
    from arena.plugins import get_registry
    from arena_lerobot.export import plan_export

    monkeypatch.syspath_prepend(str(TESTS))
    from standin_adapter import StandInAdapter

    # this process only: the stand-in answers for lerobot/metaworld (SMALL records no camera)
    monkeypatch.setitem(get_registry().embodiment_adapters, "lerobot/metaworld", StandInAdapter)
    plan = plan_export(small, "zero", tmp_path / "ds")
    assert (plan.adapter, plan.fps, plan.videos, plan.repo_id) == ("lerobot/metaworld", 80, False, "local/zero")
    assert isinstance(plan.adapter_instance, StandInAdapter)
    assert [r.episode_index for r, _ in plan.episodes] == [0, 1]
    assert plan_export(small, "zero", tmp_path / "ds", failed_only=True).episodes == plan.episodes  # zero actions: timeouts
    # the fps is the environment's, also through another adapter of it
    assert plan_export(small, "zero", tmp_path / "ds", adapter="lerobot/metaworld_environment_state").fps == 80
    named = plan_export(small, "zero", tmp_path / "ds", adapter=STANDIN, fps=15, videos=True, repo_id="me/x")
    assert (named.adapter, named.fps, named.videos, named.repo_id) == (STANDIN, 15, True, "me/x")


def test_arena_export_lists_the_lerobot_exporter():
    done = _arena("export", "--help")
    assert done.returncode == 0 and "lerobot" in done.stdout


#: A run whose camera is 16x16 (arena's Meta-World takes no smaller; LeRobot's AV1 encoder dies
#: with SIGFPE on anything up to 24 pixels wide, issue 38 item 7).
TINY_CAMERA = {
    "shared": {
        "environment": {"type": "metaworld", "task": "reach-v3", "cameras": True, "image_size": 16},
        "environment_builder": {"num_envs": 1, "seed": 0},
        "rollout_limit": {"num_episodes": 1, "max_episode_steps": 2},
        "policy": {"type": "zero_action"},
    },
    "runs": {"tiny": {"trajectories": {"enabled": True}}},
}


def _leftovers(target: Path) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}.partial-*"))


def test_videos_of_frames_the_encoder_cannot_take_are_refused_before_writing(tmp_path):
    out = _run(tmp_path, TINY_CAMERA)
    target = tmp_path / "ds"
    done = _arena("export", "lerobot", str(out), "--run", "tiny", "--to", str(target), "--videos", "--adapter", STANDIN)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "observation.images.corner is 16x16" in done.stderr and "--no-videos" in done.stderr, done.stderr
    assert not target.exists() and _leftovers(target) == []


@pytest.mark.slow
def test_an_export_process_that_dies_natively_leaves_nothing_and_exits_3(small, tmp_path):
    _lerobot_python()
    target = tmp_path / "ds"
    done = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(target),
                  "--adapter", "standin_adapter:CrashingAdapter")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "died (signal SIGFPE)" in done.stderr and "partial dataset was removed" in done.stderr, done.stderr
    assert not target.exists() and _leftovers(target) == []
    # and the same target exports fine afterwards (nothing blocks it)
    again = _arena("export", "lerobot", str(small), "--run", "zero", "--to", str(target), "--adapter", STANDIN)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (target / "meta" / "arena_episodes.jsonl").is_file() and _leftovers(target) == []
