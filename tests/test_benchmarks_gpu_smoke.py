"""``python -m benchmarks --gpu`` keeps working: its CPU smoke run, and its model's contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_benchmark_model_answers_droid_requests_with_15_by_8_chunks() -> None:
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.common import droid_request
        from benchmarks.vla_model import VlaModel
    finally:
        sys.path.remove(str(ROOT))
    model = VlaModel("smoke", device="cpu")
    model.load()
    assert model.metadata()["action_horizon"] == 15
    single = model.infer(droid_request(0))
    assert single["actions"].shape == (15, 8) and single["actions"].dtype == np.float32
    batch = model.infer_batch([droid_request(i) for i in range(3)])
    assert len(batch) == 3 and all(reply["actions"].shape == (15, 8) for reply in batch)
    assert all(np.isfinite(reply["actions"]).all() for reply in batch)


@pytest.mark.slow
def test_the_gpu_benchmark_runs_its_cpu_smoke_case(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "gpu.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--gpu", "--smoke", "--clients", "1,3", "--duration-s", "1",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "### serving" in done.stdout and "openpi's server row skipped" in done.stdout
    (result,) = json.loads(out.read_text())
    assert result["smoke"] is True
    rows = {(row["server"], row["clients"]): row for row in result["serving"]}
    assert set(rows) == {(server, n) for server in ("arena, max_batch_size 1", "arena, defaults (batching)")
                         for n in (1, 3)}
    for row in rows.values():
        assert row["req_s"] > 0 and row["errors"] == 0 and row["p99_ms"] >= row["p50_ms"] > 0, (row, done.stdout)
        assert row["server_cpu_pct"] is not None, row
    case = result["end_to_end"]
    if not case.get("skipped"):  # environment.workers has landed: the case ran
        assert all(rate > 0 for rate in case["rates"].values())
