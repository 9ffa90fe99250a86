"""The README's first command: the quickstart experiment, end to end, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# The run itself may take up to its subprocess timeout on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs_and_reports_experts_above_zero_action(tmp_path):
    out = tmp_path / "quickstart"
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(ROOT / "examples" / "quickstart.yaml"), "--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((out / "experiment_result.json").read_text())["runs"]
    assert len(summary) == 9
    for name, run in summary.items():
        assert run["state"] == "completed", name
        assert run["n"] >= 10
        assert run["errors"] == 0
        if name.endswith("_expert"):
            assert run["success_rate"] >= 0.8, (name, run)
        if name.endswith("_zero"):
            assert run["success_rate"] == 0.0, (name, run)
        low, high = run["ci95"]
        assert 0.0 <= low <= run["success_rate"] <= high <= 1.0
    html = (out / "index.html").read_text()
    assert "reach_expert" in html and "95%" in html
    assert str(out / "index.html") in result.stdout.replace("\n", "")
