"""``python -m benchmarks --gpu``: serving a pi0.5-DROID-sized model, and a run end to end.

1. **Serving table.** :class:`benchmarks.vla_model.VlaModel` (ViT-L/16 over both DROID images
   + a 10-step flow head, (15, 8) chunks, bf16) behind three servers, each in its own process:
   openpi's ``WebsocketPolicyServer`` (only with ``--openpi-server PATH`` to openpi's
   ``websocket_policy_server.py``: it is not vendored), ``arena serve`` unbatched
   (``--max-batch-size 1``) and ``arena serve`` with its defaults (batching). For 1, 8, 32,
   64 and 128 clients (openpi-client processes sending DROID requests one after another) it
   reports req/s, p50 and p99 latency, the server's CPU (its process tree, busiest threads,
   from ``/proc``) and the GPU's utilization (NVML).
2. **End to end.** ``franka_kitchen`` with three 180x320 cameras, 64 envs on environment
   workers (``workers: auto``), through ``arena run``: with a local zero-action policy and no
   cameras (simulation), with cameras (+ rendering), and with the model served by ``arena
   serve`` with batching (+ wire and inference). It reports env-steps/s of each and the time
   per step of all envs that each part adds; the served run's records split request time into
   server inference and the rest (wire, queueing, encoding).

With ``--smoke``, or with no CUDA device, everything runs on the CPU at toy sizes (a tiny
model, 1 and 4 clients, 2 envs, short windows): about a minute or two, which the test suite
runs to keep this benchmark working. GPU figures belong in docs/performance.md with date and machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from arena.processes import spawn, terminate
from benchmarks.common import table
from benchmarks.sampling import GpuSampler
from benchmarks.serving import ROOT, drive

FULL_CLIENTS = (1, 8, 32, 64, 128)
SMOKE_CLIENTS = (1, 4)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _http_ok(port: int, path: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class _Server:
    """A server process started from ``argv``, ready once ``GET path`` answers 200."""

    def __init__(self, label: str, argv: list[str], port: int, ready_path: str, log: Path) -> None:
        self.label, self.argv, self.port, self.ready_path, self.log = label, argv, port, ready_path, log
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> _Server:
        self.proc = spawn(self.argv, self.log, env=_env())  # its own process group; dies with us
        deadline = time.monotonic() + 900  # a ViT-L loads and warms up in well under that
        while not _http_ok(self.port, self.ready_path):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.label} not ready after 900 s; see {self.log}")
            time.sleep(0.25)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            terminate(self.proc, grace_s=15)  # its whole process group


def _servers(size: str, device: str, openpi_server: Path | None, logs: Path) -> list[tuple[str, list[str], str]]:
    """(label, argv, readiness path) of each server of the table; ``{port}`` is filled in later."""
    arena = [sys.executable, "-m", "arena", "serve", "benchmarks.vla_model:VlaModel", "--port", "{port}",
             "-o", f"size={size}", "-o", f"device={device}"]
    rows = []
    if openpi_server is not None:
        rows.append(("openpi WebsocketPolicyServer", [
            sys.executable, "-m", "benchmarks.openpi_host", "--server-file", str(openpi_server), "--port", "{port}",
            "--size", size, "--device", device], "/healthz"))
    rows.append(("arena, max_batch_size 1", [*arena, "--max-batch-size", "1"], "/readyz"))
    rows.append(("arena, defaults (batching)", arena, "/readyz"))
    return rows


def serving_table(size: str, device: str, clients: tuple[int, ...], openpi_server: Path | None,
                  warmup_s: float, duration_s: float, logs: Path) -> dict[str, Any]:
    gpu = GpuSampler() if device.startswith("cuda") else None
    results = []
    for label, argv, ready_path in _servers(size, device, openpi_server, logs):
        port = _free_port()
        argv = [part.replace("{port}", str(port)) for part in argv]
        log = logs / f"{label.split(',')[0].split()[0]}-{len(results)}.log"
        with _Server(label, argv, port, ready_path, log) as server:
            assert server.proc is not None
            for n in clients:
                row = drive(port, n, server_pid=server.proc.pid, warmup_s=warmup_s, duration_s=duration_s,
                            gpu=gpu if gpu is not None and gpu.available else None)
                row["server"] = label
                results.append(row)
                print(f"  {label}, {n} clients: {row['req_s']:.1f} req/s, p50 {row['p50_ms']:.1f} ms", flush=True)
    rows = [[
        r["server"], r["clients"], f"{r['req_s']:.1f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
        "-" if r["server_cpu_pct"] is None else f"{r['server_cpu_pct']:.0f} ({', '.join(f'{p:.0f}' for _, p in r['server_threads'][:3])})",
        "-" if r["gpu_util_pct"] is None else f"{r['gpu_util_pct']:.0f}",
        r["errors"],
    ] for r in results]
    text = table(["server", "clients", "req/s", "p50 ms", "p99 ms", "server CPU % (busiest threads)",
                  "GPU util %", "errors"], rows)
    if openpi_server is None:
        text += "\n\n(openpi's server row skipped: pass --openpi-server PATH/TO/websocket_policy_server.py)"
    return {"rows": results, "table": text}


# ---- end to end ------------------------------------------------------------------------------


def _workers_supported() -> bool:
    from arena.envs.base import EnvironmentConfig

    return "workers" in EnvironmentConfig.model_fields


def _experiment(num_envs: int, episodes: int, steps: int, port: int, size: tuple[int, int],
                workers: str | None = "auto") -> dict[str, Any]:
    env: dict[str, Any] = {"type": "franka_kitchen", "task": "microwave", "image_height": size[0],
                           "image_width": size[1]}
    if workers is not None:
        env["workers"] = workers
    return {
        "requires": {"arena-core": ">=0.1", "arena-plugin-openpi": ">=0.1"},
        "launch": {"backend": "local", "local": {"jobs": 1}},
        "shared": {
            "environment_builder": {"num_envs": num_envs, "seed": 0},
            "rollout_limit": {"num_episodes": episodes, "max_episode_steps": steps, "terminate_on_success": False},
        },
        "runs": {
            "simulation": {"environment": {**env, "cameras": False}, "policy": {"type": "zero_action"}},
            "rendering": {"environment": env, "policy": {"type": "zero_action"}},
            "served": {
                "environment": env,
                "policy": {"type": "pi0_remote", "policy_variant": "pi05", "embodiment": "droid",
                           "remote_host": "127.0.0.1", "remote_port": port},
                "server": {"external": True},
            },
        },
    }


def _rate(run_dir: Path) -> tuple[float, int, dict[str, Any] | None]:
    """(env-steps/s over the rollout window, env-steps, latency summary) of one run."""
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines() if line.strip()]
    bad = [r for r in records if r["outcome"] == "error"]
    if bad:
        raise RuntimeError(f"{run_dir.name}: {len(bad)} error episodes, e.g. {bad[0]['error']}")
    ends = [datetime.fromisoformat(r["finished_at"]).timestamp() for r in records]
    starts = [end - r["duration_s"] for end, r in zip(ends, records)]
    steps = sum(r["steps"] for r in records)
    result = json.loads((run_dir / "run_result.json").read_text())
    return steps / max(max(ends) - min(starts), 1e-9), steps, result.get("latency")


def end_to_end(size: str, device: str, num_envs: int, episodes: int, steps: int, image: tuple[int, int],
               logs: Path, workers: str | None = "auto") -> dict[str, Any]:
    if workers is not None and not _workers_supported():
        return {"table": "skipped: this checkout has no environment.workers (issue 13, item 1); the case "
                         "runs `workers: auto` once it has", "skipped": True}
    import yaml

    port = _free_port()
    argv = [sys.executable, "-m", "arena", "serve", "benchmarks.vla_model:VlaModel", "--port", str(port),
            "-o", f"size={size}", "-o", f"device={device}"]
    with _Server("arena serve (batching)", argv, port, "/readyz", logs / "e2e-server.log"):
        with tempfile.TemporaryDirectory(prefix="arena-e2e-") as tmp:
            experiment = Path(tmp) / "e2e.yaml"
            experiment.write_text(yaml.safe_dump(_experiment(num_envs, episodes, steps, port, image, workers)))
            out = Path(tmp) / "out"
            done = subprocess.run([sys.executable, "-m", "arena", "run", str(experiment), "--output-dir", str(out)],
                                  env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                raise RuntimeError(f"arena run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            rates = {name: _rate(out / name) for name in ("simulation", "rendering", "served")}
    step_ms = {name: 1000.0 * num_envs / rate for name, (rate, _, _) in rates.items()}
    latency = rates["served"][2] or {}
    rows = [
        ["simulation (zero action, no cameras)", f"{rates['simulation'][0]:.0f}", f"{step_ms['simulation']:.1f}", ""],
        ["+ rendering (three cameras)", f"{rates['rendering'][0]:.0f}", f"{step_ms['rendering']:.1f}",
         f"+{step_ms['rendering'] - step_ms['simulation']:.1f} rendering"],
        ["+ wire and inference (served model)", f"{rates['served'][0]:.0f}", f"{step_ms['served']:.1f}",
         f"+{step_ms['served'] - step_ms['rendering']:.1f} policy"],
    ]
    text = table([f"franka_kitchen, {num_envs} envs, workers {workers or 0}", "env-steps/s",
                  "ms per step of all envs", "added"], rows)
    if latency:
        text += (f"\n\nserved requests: {latency.get('requests')}, mean {latency.get('mean_ms', 0):.1f} ms, of which "
                 f"server inference {latency.get('server_infer_ms_mean', float('nan')):.1f} ms and wire + queueing + "
                 f"coding {latency.get('overhead_ms_mean', float('nan')):.1f} ms")
    return {"table": text, "rates": {k: v[0] for k, v in rates.items()}, "step_ms": step_ms, "latency": latency}


def run(smoke: bool, openpi_server: Path | None = None, clients: tuple[int, ...] | None = None,
        duration_s: float | None = None, e2e: bool = True) -> dict[str, Any]:
    """Both parts; on a machine without CUDA (or with ``smoke``) at toy sizes on the CPU."""
    import torch

    cuda = torch.cuda.is_available()
    smoke = smoke or not cuda
    device = "cuda" if cuda and not smoke else "cpu"
    size = "smoke" if smoke else "vit-l"
    clients = clients or (SMOKE_CLIENTS if smoke else FULL_CLIENTS)
    duration_s = duration_s or (3.0 if smoke else 15.0)
    logs = Path(tempfile.mkdtemp(prefix="arena-gpu-bench-"))
    machine = torch.cuda.get_device_name(0) if cuda else "no CUDA device"
    header = (f"{'smoke: tiny model on the CPU' if smoke else 'ViT-L/16 + 10-step flow head, bf16'}; "
              f"device {device} ({machine}); {os.cpu_count()} CPUs; server logs in {logs}")
    print(header, flush=True)
    serving = serving_table(size, device, clients, openpi_server, warmup_s=1.0 if smoke else 3.0,
                            duration_s=duration_s, logs=logs)
    parts = [header, "### serving\n\n" + serving["table"]]
    result: dict[str, Any] = {"name": "gpu", "smoke": smoke, "device": device, "machine": machine, "serving": serving["rows"]}
    if e2e:
        if smoke:
            case = end_to_end(size, device, num_envs=2, episodes=2, steps=8, image=(32, 32), logs=logs)
        else:
            case = end_to_end(size, device, num_envs=64, episodes=128, steps=80, image=(180, 320), logs=logs)
        parts.append("### end to end\n\n" + case["table"])
        result["end_to_end"] = {k: v for k, v in case.items() if k != "table"}
    result["table"] = "\n\n".join(parts)
    return result
