"""Issue 38 item 4: a tracker that cannot be reached costs a run at most its sink's
``timeout_s``, the tracker library's own waiting included (W&B's ``init``/``finish`` wait up
to 90 s for an unreachable service; MLflow's HTTP client retries for minutes). Both are
pointed at a loopback port nothing listens on, and nothing of the sink may outlive the run in
the process that called it (a training script calling ``arena.evaluate()``)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from arena.testing.experiments import run_tiny_experiment, tiny_experiment

TIMEOUT_S = 3.0


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed on return: nothing listens there


def _sink_children() -> list[int]:
    """Processes of this one running ``arena.sink_process``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"arena.sink_process" in command:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("tracker", ["wandb", "mlflow"])
def test_an_unreachable_tracker_costs_at_most_its_timeout(tracker: str, tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip(tracker)
    port = _dead_port()
    if tracker == "wandb":
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
        options = {"project": "arena-test", "mode": "online", "per": "run", "dir": str(tmp_path / "wb")}
    else:
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
        options = {"tracking_uri": f"http://127.0.0.1:{port}", "experiment_name": "arena-test", "per": "run"}
    exp = tiny_experiment({"type": "random_action"}, episodes=3, max_episode_steps=8, run="reach")
    exp["tracking"] = {tracker: {**options, "timeout_s": TIMEOUT_S}}
    started = time.monotonic()
    outcome = run_tiny_experiment(exp, tmp_path / "out")
    took = time.monotonic() - started
    assert outcome.exit_code == 0, outcome.explain()
    assert outcome.result["runs"]["reach"]["n"] == 3
    # arena run and arena run-one each give the sink at most TIMEOUT_S after their work is
    # done. The run alone takes 5-15 s on 2 loaded cores; before the bound held, W&B's own
    # waiting made it ~190 s.
    assert took < 2 * TIMEOUT_S + 45, f"{tracker}: {took:.0f} s"
    # nothing of the sink is left behind in this process (arena.evaluate() runs in a training
    # script's): no thread still retrying, no process still waiting
    import threading

    assert not [t.name for t in threading.enumerate() if t.name.startswith("arena-sink-")]
    assert not _sink_children(), "a sink's process outlived the run"
    log = (outcome.output_dir / "reach" / "runner.log").read_text()
    assert f"sink '{tracker}'" in log, log[-2000:]
