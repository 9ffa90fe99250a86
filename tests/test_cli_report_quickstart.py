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
