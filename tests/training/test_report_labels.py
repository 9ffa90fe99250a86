"""A report of checkpoints names them by a short name, never by an absolute local path; "By
suite" never pools different checkpoints; at a laptop's width the comparison table keeps its
difference, interval and p-value on screen (issue 39 item 3)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from arena.outputs.records import EpisodeRecord, RecordWriter, write_json_atomic
from arena.results.aggregate import build_experiment_result
from arena.results.report import render_report

ROOT = "/home/researcher/projects/act-metaworld-reach-2026-12-01/outputs/train/run_seed_1/checkpoints"
STEPS = ("005000", "010000", "015000")
TASKS = ("reach-v3", "push-v3")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _matrix_output(out: Path) -> Path:
    """`eval` × {3 checkpoints} × {2 tasks}, as a matrix expands it, and a zero baseline per task."""
    runs = {}
    for t, task in enumerate(TASKS):
        plan = [(f"eval.s{int(s)}-{task}", {"type": "lerobot_remote", "variant": None}, f"{ROOT}/{s}/pretrained_model", 3 + 2 * i + t)
                for i, s in enumerate(STEPS)]
        plan.append((f"zero_{task}", {"type": "zero_action", "variant": None}, None, 0))
        for run, policy, checkpoint, successes in plan:
            runs[run] = {"task": task, "policy": policy, "num_envs": 2, "seed": 0, "num_episodes": 10,
                         "work_items": [{"run": run, "episode_index": i, "seed": i} for i in range(10)]}
            with RecordWriter(out / run / "episodes.jsonl") as writer:
                for i in range(10):
                    writer.write(EpisodeRecord(run=run, episode_index=i, seed=i, env_id=i % 2, task=task, policy=policy,
                                               outcome="success" if i < successes else "failure", steps=50))
            result = {"run": run, "state": "completed", "error": None}
            if checkpoint:
                result["model"] = {"checkpoint": checkpoint, "revision": None, "image": None, "image_digest": None,
                                   "server_metadata": {"n_action_steps": 20}}
            write_json_atomic(out / run / "run_result.json", result)
    write_json_atomic(out / "manifest.json", {"format_version": 1, "experiment": "ckpts", "runs": runs})
    (out / "experiment.yaml").write_text("runs: {}\n")
    return out


def test_checkpoints_are_named_short_and_suites_never_pool_them(tmp_path: Path) -> None:
    out = _matrix_output(tmp_path / "out")
    result = build_experiment_result(out)
    labels = {name: run["policy_label"] for name, run in result["runs"].items()}
    for s in STEPS:
        assert labels[f"eval.s{int(s)}-reach-v3"] == f"lerobot_remote · checkpoint …/{s}/pretrained_model", labels
    groups = result["by_group"]
    assert len([g for g in groups if g.startswith("eval")]) == 3, list(groups)  # one suite per checkpoint
    for group in groups.values():
        assert len({result["runs"][r]["policy_label"] for r in group["runs"]}) == 1
    page = render_report(out)
    assert "/home/researcher" not in page and ROOT not in page


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (install it: .ci/setup.d/chromium.sh)")
def test_comparison_columns_stay_on_screen_at_a_laptops_width(tmp_path: Path) -> None:
    page_html = render_report(_matrix_output(tmp_path / "out"))
    script = """<script>(function(){
      const table = document.querySelector("#compare + .scroll table, #compare ~ .scroll table");
      const vw = document.documentElement.clientWidth;
      const heads = [...table.querySelectorAll("thead th")].map((th) => [th.textContent.trim(), th.getBoundingClientRect().right <= vw + 1]);
      const box = table.parentElement;
      const pre = window.parent.document.createElement("pre"); pre.id = "m";
      pre.textContent = JSON.stringify({vw, heads, scrolls: box.scrollWidth > box.clientWidth + 1, page: document.documentElement.scrollWidth});
      window.parent.document.body.appendChild(pre);})();</script>"""
    inner = page_html.replace("</body>", script + "</body>")
    page = tmp_path / "m.html"
    page.write_text('<!DOCTYPE html><html><body style="margin:0"><iframe style="border:0;display:block;width:1400px;height:1200px" '
                    f'srcdoc="{html.escape(inner, quote=True)}"></iframe></body></html>')
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                           f"--user-data-dir={tmp_path / 'p'}", "--window-size=1400,1200", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="m">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    got = json.loads(html.unescape(found.group(1)))
    assert got["vw"] == 1400 and got["page"] <= 1400, got
    assert not got["scrolls"], got
    assert all(visible for _, visible in got["heads"]), got["heads"]
