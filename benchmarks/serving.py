"""Drive a policy server with many openpi-client processes and measure it.

:func:`drive` starts ``clients`` processes of :mod:`benchmarks.serving_client` against
``host:port``, starts them together, and returns req/s over the measured window, latency
percentiles (ms) and what the server process cost meanwhile (CPU per process tree and per
thread from ``/proc``, GPU utilization from NVML). Shared by the CPU serving benchmark and
``python -m benchmarks --gpu``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.sampling import CpuSampler, GpuSampler

ROOT = Path(__file__).resolve().parents[1]


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def drive(
    port: int,
    clients: int,
    *,
    server_pid: int | None = None,
    warmup_s: float = 2.0,
    duration_s: float = 10.0,
    host: str = "127.0.0.1",
    gpu: GpuSampler | None = None,
    ready_timeout_s: float = 300.0,
) -> dict[str, Any]:
    """Run ``clients`` openpi-client processes for ``warmup_s + duration_s``; measure the last part.

    Returns ``{"clients", "req_s", "p50_ms", "p99_ms", "errors", "server_cpu_pct",
    "server_threads", "gpu_util_pct"}``. Raises RuntimeError if a client fails to start.
    """
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-c", "from benchmarks.serving_client import main; main()", "--host", host,
            "--port", str(port), "--warmup-s", str(warmup_s), "--duration-s", str(duration_s)]
    procs = [
        subprocess.Popen([*argv, "--seed", str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                         cwd=ROOT, text=True)
        for i in range(clients)
    ]
    try:
        deadline = time.monotonic() + ready_timeout_s
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()  # blocks until that client is connected
            if line.strip() != "ready" or time.monotonic() > deadline:
                raise RuntimeError(f"a benchmark client did not start (said {line!r}, exit {proc.poll()})")
        start_at = time.time() + 0.2
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start_at}\n")
            proc.stdin.flush()
        cpu = CpuSampler(server_pid) if server_pid else None
        time.sleep(max(0.0, start_at + warmup_s - time.time()))
        if cpu:
            cpu.start()
        if gpu:
            gpu.start()
        time.sleep(duration_s)
        cpu_stats = cpu.stop() if cpu else None
        gpu_util = gpu.stop() if gpu else None
        latencies: list[float] = []
        errors = 0
        for proc in procs:
            out, _ = proc.communicate(timeout=duration_s + warmup_s + 120)
            result = json.loads(out.strip().splitlines()[-1])
            latencies += result["latencies_s"]
            errors += result["errors"]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return {
        "clients": clients,
        "req_s": len(latencies) / duration_s,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * _percentile(latencies, 0.99),
        "errors": errors,
        "server_cpu_pct": None if cpu_stats is None else round(cpu_stats["cpu_pct"], 1),
        "server_threads": None if cpu_stats is None else cpu_stats["threads"],
        "gpu_util_pct": None if gpu_util is None else round(gpu_util, 1),
    }
