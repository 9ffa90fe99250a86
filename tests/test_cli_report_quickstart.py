"""Done-when check of the report: the quickstart (shrunk) shows intervals, the chart, latency and playable videos."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import av
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_report_has_intervals_chart_latency_and_playable_videos(tmp_path):
    out = tmp_path / "qs"
    overrides = [
        "shared.rollout_limit.num_episodes=2",
        "shared.rollout_limit.max_episode_steps=40",
        "runs.reach_expert.recording.enabled=true",
        "runs.reach_expert.recording.max_episodes=1",
        "runs.reach_expert.environment.image_size=32",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(ROOT / "examples" / "quickstart.yaml"), "--output-dir", str(out),
         "--jobs", "2", *overrides],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "[arena]" in result.stdout  # plain progress lines when not on a terminal
    html = (out / "index.html").read_text()
    assert re.search(r"\[\d+\.\d%, \d+\.\d%\]", html)  # Wilson intervals
    assert html.count('class="errorbar"') == 9  # the chart: one error bar per run
    assert "Request latency" in html and re.search(r"reach_expert</td><td class=\"num\">\d+</td>", html)
    assert "Policies compared on the same task" in html
    videos = [json.loads(line)["video"] for line in (out / "reach_expert" / "episodes.jsonl").read_text().splitlines()]
    recorded = [v for v in videos if v]
    assert len(recorded) == 1 and f'href="reach_expert/{recorded[0]}"' in html
    with av.open(str(out / "reach_expert" / recorded[0])) as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert sum(1 for _ in container.decode(video=0)) >= 2
    assert not (out / "reach_zero" / "videos").exists()  # recording is per run
    assert json.loads((out / "experiment_result.json").read_text())["runs"]["reach_expert"]["videos"] == 1


@pytest.mark.timeout(900)
def test_quickstart_cancelled_mid_run_is_marked_partial_and_compare_exits_3(tmp_path):
    """Done-when of issue 17: a cancelled quickstart's report marks its runs partial, in the
    HTML a browser shows; `arena compare` against it exits 3 and says which runs are partial."""
    import shutil
    import time

    overrides = ["shared.rollout_limit.num_episodes=2", "shared.rollout_limit.max_episode_steps=20", "--jobs", "2"]
    arena = [sys.executable, "-m", "arena"]
    cancelled = tmp_path / "cancelled"
    proc = subprocess.Popen([*arena, "run", str(ROOT / "examples" / "quickstart.yaml"), "--output-dir", str(cancelled),
                             *overrides], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while not list(cancelled.glob("*/run_result.json")):  # one run finished, the others not
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0][-3000:]
        time.sleep(0.2)
    cancel = subprocess.run([*arena, "cancel", str(cancelled)], capture_output=True, text=True, timeout=120)
    assert cancel.returncode == 0, cancel.stderr
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 143, output[-3000:]  # cancelled (128 + SIGTERM), not a success
    assert "cancelled: finished episodes are kept" in output

    result = json.loads((cancelled / "experiment_result.json").read_text())
    partial = sorted(name for name, run in result["runs"].items() if run["partial"])
    assert partial and all(result["runs"][n]["partial_note"].startswith("partial: cancelled") for n in partial)
    html = (cancelled / "index.html").read_text()
    assert 'id="partial-runs"' in html and f"{len(partial)} run(s) are partial" in html
    for name in partial:
        assert re.search(rf'>{name}</a> <span class="partial" title="partial: cancelled', html), name
        assert f'<span class="chart-label">{name} (partial)</span>' in html  # the chart's label

    reference = tmp_path / "reference"  # the same experiment, another output directory
    shutil.copytree(cancelled, reference)
    compared = subprocess.run([*arena, "compare", str(reference), str(cancelled)], capture_output=True, text=True,
                              timeout=120)
    assert compared.returncode == 3, compared.stdout[-3000:] + compared.stderr[-3000:]
    assert f"run {partial[0]} in B: partial: cancelled" in compared.stderr
