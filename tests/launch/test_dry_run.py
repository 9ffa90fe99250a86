"""`arena run --dry-run` is a page a user reads: each run on a line, each server task once."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from arena.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_dry_run_lists_each_run_once_and_each_server_task_once(tmp_path):
    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "quickstart.yaml"), "--dry-run",
                                      "--output-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) < 40, result.output  # was ~1,500 with every resolved default printed
    assert sum(line.startswith("  run ") for line in lines) == 9
    assert sum(line.startswith("  server metaworld-expert for ") for line in lines) == 1
    assert "null" not in result.output
    assert "--list-overrides" in result.output
    assert not (tmp_path / "out").exists()
