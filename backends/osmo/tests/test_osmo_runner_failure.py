"""The runner's failure record when its policy server never became ready."""

from __future__ import annotations

import json

from arena_osmo.runner_failure import main as failure_main


def test_probe_failure_records_the_run_as_failed(tmp_path):
    assert failure_main([str(tmp_path), "pi", "policy server r0-pi-server was not ready after 900 s"]) == 0
    result = json.loads((tmp_path / "pi" / "run_result.json").read_text())
    status = json.loads((tmp_path / "pi" / "status.json").read_text())
    assert result["state"] == status["state"] == "failed"
    assert "not ready after 900 s" in result["error"]
