"""One training curve (issue 39 item 2): `arena watch` over three checkpoints logs them into
one W&B run and one MLflow series run, each read back with a point per checkpoint step and
the episode metric with its interval; the watch's own page draws success rate and the metric
against training step, checked in headless Chromium."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("wandb")
pytest.importorskip("mlflow")

from arena_wandb.offline import offline_runs  # noqa: E402

from arena.testing.experiments import run_in_session  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
STEPS = (100, 200, 300)


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("curve")
    ckpts, out = tmp / "ckpts", tmp / "watch"
    uri = f"sqlite:///{tmp / 'store' / 'mlflow.db'}"
    (tmp / "store").mkdir()
    exp = tmp / "curve.yaml"
    exp.write_text(yaml.safe_dump({
        "tracking": {"wandb": {"project": "arena-test", "mode": "offline", "dir": str(tmp / "wb"), "max_videos": 0},
                     "mlflow": {"tracking_uri": uri, "experiment_name": "curve", "max_videos": 0}},
        "shared": {"rollout_limit": {"num_episodes": 4, "max_episode_steps": 6},
                   "environment_builder": {"num_envs": 2}},
        "runs": {"toy": {"role": "evaluated",
                         "environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False, "report_distance": True},
                         "policy": {"type": "random_action"}}},
    }))
    for step in STEPS:
        (ckpts / f"ckpt_{step}").mkdir(parents=True)
        (ckpts / f"ckpt_{step}" / "model.bin").write_bytes(os.urandom(256))
    argv = [sys.executable, "-m", "arena", "watch", str(ckpts), "--experiment", str(exp), "runs.toy.environment.task={checkpoint}",
            "--output-dir", str(out), "--settle", "0.5", "--poll", "0.3", "--max-evaluations", "3", "--pattern", r"ckpt_(?P<step>\d+)"]
    env = {**os.environ, "WANDB_SILENT": "true"}
    code, output = run_in_session(argv, cwd=tmp, env=env, timeout_s=400)
    assert code == 0, output
    return {"tmp": tmp, "out": out, "uri": uri, "output": output}


def test_watch_prints_each_checkpoint_and_a_summary(watched: dict) -> None:
    output = watched["output"]
    for step in STEPS:
        assert re.search(rf"arena watch: ckpt_{step} \(step {step}\): toy \d/4 = \d+% \[\d+, \d+\]", output), output
    summary = output[output.index("arena watch: summary"):]
    assert [int(s) for s in re.findall(r"^\s+(\d+)\s+ckpt_", summary, re.M)] == list(STEPS), summary


def test_wandb_holds_one_curve_over_the_checkpoint_steps(watched: dict) -> None:
    runs = [r for r in offline_runs(watched["tmp"] / "wb" / "wandb") if r.job_type == "arena-experiment"]
    assert len(runs) == 3 and len({r.run_id for r in runs}) == 1, [(r.run_id, r.name) for r in runs]  # one W&B run
    rows = sorted((row for r in runs for row in r.history if "toy/success_rate" in row), key=lambda row: row["checkpoint_step"])
    assert [row["checkpoint_step"] for row in rows] == list(STEPS)
    for row, step in zip(rows, STEPS):
        result = json.loads((watched["out"] / f"ckpt_{step}" / "experiment_result.json").read_text())["runs"]["toy"]
        assert row["toy/success_rate"] == pytest.approx(result["success_rate"])
        assert row["evaluated/success_rate"] == pytest.approx(result["success_rate"])
        assert row["toy/ci95_low"] == pytest.approx(result["ci95"][0])
        distance = result["metrics"]["distance"]
        assert row["toy/metrics/distance/mean"] == pytest.approx(distance["mean"])
        assert row["toy/metrics/distance/ci95_high"] == pytest.approx(distance["ci_high"])
        assert "toy/return/mean" in row and "toy/return/ci95_low" in row
        assert not [k for k in row if k.startswith("overall/")]


def test_mlflow_holds_one_series_run_with_a_child_per_checkpoint(watched: dict) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=watched["uri"])
    experiment = client.get_experiment_by_name("curve")
    runs = client.search_runs([experiment.experiment_id])
    (series,) = [r for r in runs if r.data.tags.get("arena.role") == "series"]
    children = sorted((r for r in runs if r.data.tags.get("mlflow.parentRunId") == series.info.run_id), key=lambda r: int(r.data.tags["arena.step"]))
    assert [c.info.run_name for c in children] == [f"curve/ckpt_{s}" for s in STEPS]
    history = client.get_metric_history(series.info.run_id, "toy/success_rate")
    assert sorted(m.step for m in history) == list(STEPS)
    assert sorted(m.step for m in client.get_metric_history(series.info.run_id, "toy/metrics/distance/ci95_low")) == list(STEPS)
    # artifacts beside the store, not in ./mlruns of a working directory
    assert experiment.artifact_location == (watched["tmp"] / "store" / "mlartifacts").as_uri()
    assert (watched["tmp"] / "store" / "mlartifacts").is_dir() and not (watched["tmp"] / "mlruns").exists()


MEASURE = """<script>
(function () {
  const out = {viewport: document.documentElement.clientWidth, page: document.documentElement.scrollWidth,
    charts: [...document.querySelectorAll("section.quantity")].map((s) => ({
      id: s.id, points: s.querySelectorAll("circle").length, bars: s.querySelectorAll("line.ci").length,
      width: s.querySelector("svg").getBoundingClientRect().width}))};
  const pre = window.parent.document.createElement("pre");
  pre.id = "arena-measure"; pre.textContent = JSON.stringify(out); window.parent.document.body.appendChild(pre);
})();
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (install it: .ci/setup.d/chromium.sh)")
@pytest.mark.parametrize("width", [1400, 390])
def test_the_watch_page_draws_the_curve_in_a_browser(watched: dict, width: int, tmp_path: Path) -> None:
    page_html = (watched["out"] / "index.html").read_text()
    assert "<script" not in page_html
    framed = lambda script, height: ('<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;display:block;'  # noqa: E731
                                     f'width:{width}px;height:{height}px" srcdoc="{html.escape(page_html.replace("</body>", script + "</body>"), quote=True)}">'
                                     "</iframe></body></html>")
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--hide-scrollbars", f"--window-size={max(width, 800)},1600"]
    page = tmp_path / "measure.html"
    page.write_text(framed(MEASURE, 1600))
    dom = subprocess.run([*base, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="arena-measure">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    got = json.loads(html.unescape(found.group(1)))
    assert got["page"] <= got["viewport"] == width, got
    charts = {c["id"]: c for c in got["charts"]}
    assert set(charts) >= {"success_rate", "distance"}, charts
    for chart in charts.values():
        assert chart["points"] == 3 and 0 < chart["width"] <= width, chart
    assert charts["success_rate"]["bars"] == 3 and charts["distance"]["bars"] == 3
    shot = tmp_path / f"watch-{width}.png"
    page.write_text(framed("", 1600))
    subprocess.run([*base, f"--user-data-dir={tmp_path / 'p2'}", f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    assert shot.stat().st_size > 10_000


#: The training loop of docs/tracking.md, with both trackers: only
#: `tracking.step` is given, a checkpoint evaluates, then a broken one fails (two
#: evaluations: the least that shows one curve, and what a failed point looks like on it).
_LOOP = '''
import json, os, sys
import numpy as np
import arena
from arena.errors import EvaluationFailed

said = {}
for step in (100,):
    path = os.path.abspath(f"ckpt_{step}.npz")
    np.savez(path, actions=np.full((6, 2), 0.5, np.float32))
    result = arena.evaluate("loop.yaml", overrides={"runs.toy.policy.path": path, "tracking.step": step},
                            output_dir=f"evals/step_{step}")
    said[step] = result.success_rate
try:
    arena.evaluate("loop.yaml", overrides={"runs.toy.policy.path": os.path.abspath("ckpt_200.npz"), "tracking.step": 200},
                   output_dir="evals/step_200")
except EvaluationFailed as exc:
    said[200] = str(exc)
print(json.dumps(said))
'''


@pytest.fixture(scope="module")
def looped(tmp_path_factory, watched: dict) -> dict:
    tmp = tmp_path_factory.mktemp("loop")
    uri = watched["uri"]  # the watch's store, created already (its own MLflow experiment)
    (tmp / "loop.yaml").write_text(yaml.safe_dump({
        "tracking": {"wandb": {"project": "arena-test", "mode": "offline", "dir": str(tmp / "wb"), "max_videos": 0},
                     "mlflow": {"tracking_uri": uri, "experiment_name": "loop", "max_videos": 0}},
        "shared": {"rollout_limit": {"num_episodes": 2, "max_episode_steps": 6}, "environment_builder": {"num_envs": 2}},
        "runs": {"toy": {"environment": {"type": "arena.testing.envs:ToyReachEnv", "cameras": False},
                         "policy": {"type": "replay", "path": "given-per-step.npz"}}},
    }))
    done = subprocess.run([sys.executable, "-c", _LOOP], cwd=tmp, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "WANDB_SILENT": "true"})
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ckpt_200.npz" in said["200"], said  # the broken checkpoint raised
    return {"tmp": tmp, "uri": uri}


def test_a_training_loop_giving_only_the_step_makes_one_wandb_curve_and_marks_the_failed_step(looped: dict) -> None:
    runs = sorted((r for r in offline_runs(looped["tmp"] / "wb" / "wandb") if r.job_type == "arena-experiment"),
                  key=lambda r: r.summary.get("checkpoint_step", 0))
    assert len(runs) == 2 and len({r.run_id for r in runs}) == 1, [(r.run_id, r.name) for r in runs]  # one W&B run
    assert {r.name for r in runs} == {"loop"} and {r.group for r in runs} == {"loop"}  # the default series: the experiment's name
    steps = [row["checkpoint_step"] for r in runs for row in r.history if "toy/failed" in row or "toy/success_rate" in row]
    assert steps == [100, 200]
    good, failed = runs
    assert good.summary["failed"] is False and good.exit_code == 0 and "failed" not in " ".join(good.tags)
    assert failed.summary["failed"] is True and "ckpt_200.npz" in failed.summary["failures"], failed.summary
    assert failed.exit_code == 1 and "failed:step200" in failed.tags, failed.tags
    [row] = [row for row in failed.history if "toy/failed" in row]
    assert row["checkpoint_step"] == 200 and row["toy/failed"] == 1 and "toy/n" not in row and "toy/success_rate" not in row  # no zeros that read as a rate


def test_a_training_loop_giving_only_the_step_makes_one_mlflow_series_whose_failed_evaluation_is_failed(looped: dict) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=looped["uri"])
    runs = client.search_runs([client.get_experiment_by_name("loop").experiment_id])
    (series,) = [r for r in runs if r.data.tags.get("arena.role") == "series"]
    assert series.data.tags["arena.series"] == "loop" and series.info.run_name == "loop"
    children = {int(r.data.tags["arena.step"]): r for r in runs if r.data.tags.get("mlflow.parentRunId") == series.info.run_id}
    assert sorted(children) == [100, 200]
    assert [children[s].info.status for s in (100, 200)] == ["FINISHED", "FAILED"]
    assert "ckpt_200.npz" in children[200].data.tags["arena.failures"]
    assert series.info.status == "FAILED"  # the series ended with its last evaluation, never left RUNNING
    assert sorted(m.step for m in client.get_metric_history(series.info.run_id, "toy/success_rate")) == [100]
    assert [m.step for m in client.get_metric_history(series.info.run_id, "toy/failed")] == [200]
