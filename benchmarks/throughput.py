"""Benchmark 3: env-steps/s of RemoteChunkReplayPolicy with a synthetic env (no simulator).

The model costs 20 ms + 1 ms per batch item (``ChunkModel(cost_ms=20, per_item_ms=1)`` in
arena's server, in its own process); ``open_loop_horizon`` is 1, so every env requests on
every step. Baseline: requests one after another (``concurrent_requests: false``) to a server
without batching, i.e. 21 ms per request. Batched: concurrent requests over the per-env
connections to a server with ``max_batch_size`` 32. Ideal ratio at n envs: 21 n / (20 + n).
"""

from __future__ import annotations

import statistics
import time
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from arena.policies.adapters import EmbodimentAdapter
from arena.policies.remote import RemoteChunkReplayPolicy, RemotePolicyConfig
from arena.testing.doubles import ServerProcess
from benchmarks.common import table

COST_MS, PER_ITEM_MS = 20.0, 1.0
NUM_ENVS = (1, 4, 16, 32)


class _StateAdapter(EmbodimentAdapter):
    action_dim: ClassVar[int] = 8

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        return observation["policy"]["state"][env_id]

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        return {"observation/state": extracted, "prompt": instruction or ""}


class _SyntheticPolicy(RemoteChunkReplayPolicy):
    name = "benchmark_remote"


def _steps_per_s(port: int, num_envs: int, concurrent: bool, steps: int, repeats: int) -> float:
    config = RemotePolicyConfig(
        remote_port=port, embodiment="synthetic", open_loop_horizon=1, concurrent_requests=concurrent
    )
    policy = _SyntheticPolicy(config, adapter=_StateAdapter())
    env = SimpleNamespace(num_envs=num_envs)
    obs = {"policy": {"state": np.zeros((num_envs, 8), np.float32)}}
    policy.start(env)
    policy.set_task_description("benchmark")
    try:
        policy.get_action(env, obs)  # first requests on each connection
        rates = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                policy.get_action(env, obs)
            rates.append(steps * num_envs / (time.perf_counter() - start))
        return statistics.median(rates)
    finally:
        policy.close()


def run(quick: bool) -> dict[str, Any]:
    model = ["--action-shape", "1", "8", "--cost-ms", str(COST_MS), "--per-item-ms", str(PER_ITEM_MS)]
    repeats = 5
    rows = []
    ratios = {}
    with ServerProcess("arena", *model, "--max-batch-size", "1") as plain, ServerProcess(
        "arena", *model, "--max-batch-size", "32", "--max-wait-ms", "5"
    ) as batching:
        for n in NUM_ENVS:
            seq_steps = max(1, (3 if quick else 8) * 4 // n)
            bat_steps = 4 if quick else 12
            sequential = _steps_per_s(plain.port, n, False, seq_steps, repeats)
            batched = _steps_per_s(batching.port, n, True, bat_steps, repeats)
            ideal = (COST_MS + PER_ITEM_MS) * n / (COST_MS + PER_ITEM_MS * n)
            ratios[n] = batched / sequential
            rows.append([n, f"{sequential:.1f}", f"{batched:.1f}", f"{batched / sequential:.2f}x", f"{ideal:.2f}x"])
    text = table(
        ["num_envs", "one-after-another env-steps/s", "batched + concurrent env-steps/s", "speed-up", "ideal"],
        rows,
    )
    return {"name": "throughput", "table": text, "ratios": ratios}
