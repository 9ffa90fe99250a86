"""The local backend gives each server its own GPUs (a stub ``nvidia-smi`` plays the machine)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.launch.gpus import GpuPool, discover_gpus

REACH = {"type": "metaworld", "task": "reach-v3"}


def stub_nvidia_smi(tmp_path: Path, gpus: int) -> dict[str, str]:
    """An environment whose PATH starts with an ``nvidia-smi`` listing ``gpus`` H200s."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    lines = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)\\n" for i in range(gpus))
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -L ] && printf '{lines}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def gpu_run(gpu: int) -> dict:
    """A Meta-World expert run whose own (unshared) server asks for ``gpu`` GPUs."""
    return {
        "environment": REACH,
        "policy": {"type": "metaworld_expert_remote"},
        "server": {"resources": {"gpu": gpu}, "shareable": False},
    }


def write(tmp_path: Path, runs: dict, jobs: int) -> Path:
    doc = {
        "launch": {"backend": "local", "local": {"jobs": jobs}},
        "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
        "runs": runs,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_gpus_are_found_with_nvidia_smi_or_arenas_own_cuda_visible_devices(tmp_path):
    env = stub_nvidia_smi(tmp_path, 2)
    assert discover_gpus(env) == (["0", "1"], "nvidia-smi -L")
    assert discover_gpus({**env, "CUDA_VISIBLE_DEVICES": "3,5"})[0] == ["3", "5"]
    assert discover_gpus({**env, "CUDA_VISIBLE_DEVICES": ""})[0] == []
    assert discover_gpus({"PATH": str(tmp_path / "nowhere")})[0] == []


def test_the_pool_hands_out_free_gpus_and_queues_the_rest():
    pool = GpuPool(["0", "1"], "test")
    assert pool.take("a", 1) == ["0"] and pool.take("b", 1) == ["1"]
    assert pool.take("c", 1) is None and pool.held_by(None, 1) == ["a", "b"]
    pool.give_back(["0"])
    assert pool.take("c", 1) == ["0"]
    assert pool.shortage(3, None) == "it asks for 3 GPU(s) and this machine has 2 (test)"
    assert "names GPU 7" in pool.shortage(1, ["7"])


def test_dry_run_shows_each_servers_gpus(tmp_path):
    env = {**stub_nvidia_smi(tmp_path, 2), "CUDA_VISIBLE_DEVICES": "3,5"}
    path = write(tmp_path, {"a": gpu_run(1), "b": gpu_run(1), "c": gpu_run(1), "d": gpu_run(4)}, jobs=4)
    dry = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--dry-run"], capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr
    # "# server NAME (port chosen at start); GPUs: ...", then the server's command
    gpu_lines = ["GPUs: " + line.split("; GPUs: ", 1)[1] for line in dry.stdout.splitlines() if line.startswith("# server ")]
    assert gpu_lines[0].startswith("GPUs: CUDA_VISIBLE_DEVICES=3 (of 3, 5;")
    assert gpu_lines[1].startswith("GPUs: CUDA_VISIBLE_DEVICES=5 ")
    assert "queued until they are free" in gpu_lines[2]
    assert "cannot start: it asks for 4 GPU(s) and this machine has 2" in gpu_lines[3]


@pytest.mark.slow
def test_servers_on_one_workstation_get_their_own_gpus_queue_for_busy_ones_and_too_many_fail(tmp_path):
    env = stub_nvidia_smi(tmp_path, 2)
    runs = {"a": gpu_run(1), "b": gpu_run(1), "both": gpu_run(2), "greedy": gpu_run(3)}
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(write(tmp_path, runs, jobs=4)), "--output-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 3, result.stdout + result.stderr  # "greedy" fails

    def server(run: str) -> dict:
        return json.loads((out / run / "run_result.json").read_text())["server"]

    assert {tuple(server("a")["gpus"]), tuple(server("b")["gpus"])} == {("0",), ("1",)}
    assert server("both")["gpus"] == ["0", "1"]  # it waited until a's and b's servers stopped
    assert "waits for 2 GPU(s)" in result.stdout
    greedy = json.loads((out / "greedy" / "run_result.json").read_text())
    assert greedy["state"] == "failed"
    assert "asks for 3 GPU(s) and this machine has 2 (nvidia-smi -L)" in greedy["error"]
    for run in ("a", "b", "both"):
        assert json.loads((out / run / "run_result.json").read_text())["state"] == "completed"
        assert "CUDA_VISIBLE_DEVICES=" + ",".join(server(run)["gpus"]) in (out / run / "server.log").read_text()


def test_dry_run_says_the_gpu_numbering_and_the_server_gets_it(tmp_path):
    """``gpus: [0]`` means nvidia-smi's GPU 0: servers get ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
    (CUDA's default, fastest first, numbers mixed GPU models otherwise), unless the user set it."""
    env = stub_nvidia_smi(tmp_path, 2)
    env.pop("CUDA_DEVICE_ORDER", None)
    tell = "import os, sys; print('server sees CUDA_DEVICE_ORDER=' + os.environ['CUDA_DEVICE_ORDER'], flush=True); sys.exit(1)"
    run = {**gpu_run(1), "server": {**gpu_run(1)["server"], "local_command": ["{python}", "-c", tell], "readiness": "tcp"}}
    path = write(tmp_path, {"a": run}, jobs=1)
    dry = subprocess.run([sys.executable, "-m", "arena", "run", str(path), "--dry-run"], capture_output=True, text=True, env=env)
    assert dry.returncode == 0, dry.stderr
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi's numbering)" in dry.stdout
    mine = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--dry-run"],
        capture_output=True, text=True, env={**env, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
    )
    assert "CUDA_DEVICE_ORDER=FASTEST_FIRST (set by you)" in mine.stdout
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 3, result.stdout + result.stderr  # the stand-in server exits
    assert "server sees CUDA_DEVICE_ORDER=PCI_BUS_ID" in (out / "a" / "server.log").read_text()
