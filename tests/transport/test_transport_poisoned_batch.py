"""One bad request in a batch fails only its own connection: the server retries a batch whose
``infer_batch`` raised request by request, and the rollout counts one failed call once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from arena.transport import PolicyClient, PolicyServer, ServerError


class StrictBatchModel:
    """Refuses a non-finite state, as the Meta-World expert server does; records batch sizes."""

    def __init__(self) -> None:
        self.batch_sizes: list[int] = []

    def metadata(self) -> dict[str, Any]:
        return {"model": "strict"}

    def load(self) -> None:
        pass

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        state = np.asarray(obs["state"], np.float64)
        if not np.all(np.isfinite(state)):
            raise ValueError("'state' must be finite floats")
        return {"actions": state * 2}

    def infer_batch(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.batch_sizes.append(len(batch))
        return [self.infer(obs) for obs in batch]


def test_one_non_finite_request_fails_alone_and_its_batch_mates_get_replies() -> None:
    model = StrictBatchModel()
    server = PolicyServer(model, "127.0.0.1", 0, max_wait_ms=500).start_in_thread()
    try:
        clients = [PolicyClient("127.0.0.1", server.port, connect_timeout_s=10, request_timeout_s=30) for _ in range(4)]
        for client in clients:
            client.connect()
        results: list[Any] = [None] * 4
        barrier = threading.Barrier(4)

        def ask(i: int) -> None:
            barrier.wait()
            state = np.full(3, np.nan if i == 2 else float(i))
            try:
                results[i] = clients[i].infer({"state": state})
            except ServerError as exc:
                results[i] = exc

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for client in clients:
            client.close()
    finally:
        server.stop()
    assert max(model.batch_sizes) > 1, model.batch_sizes  # the four were batched together
    assert isinstance(results[2], ServerError) and "must be finite" in str(results[2].traceback)
    for i in (0, 1, 3):
        assert not isinstance(results[i], BaseException), results[i]
        np.testing.assert_array_equal(results[i]["actions"], np.full(3, 2.0 * i))


POISON_ENV = '''
import numpy as np
from arena.envs.metaworld import MetaWorldEnvironment

POISON_SEED = 103


class PoisonedMetaWorld(MetaWorldEnvironment):
    """Meta-World whose episode of seed 103 reports a NaN state (a broken sensor, say)."""

    name = "poisoned_metaworld"

    def reset_envs(self, env_ids, seeds):
        self.poisoned = getattr(self, "poisoned", set())
        for e, seed in zip(env_ids, seeds):
            (self.poisoned.add if seed == POISON_SEED else self.poisoned.discard)(e)
        return super().reset_envs(env_ids, seeds)

    def _observation(self):
        obs = super()._observation()
        for e in getattr(self, "poisoned", ()):
            obs["policy"]["state"][e] = np.nan
        return obs
'''


@pytest.mark.slow
def test_arena_run_with_one_poisoned_env_fails_only_that_episode(tmp_path: Path) -> None:
    (tmp_path / "poison_env.py").write_text(textwrap.dedent(POISON_ENV))
    doc = {
        "launch": {"backend": "local"},
        "shared": {
            "environment_builder": {"num_envs": 8, "seed": 100},
            "rollout_limit": {"num_episodes": 8, "max_episode_steps": 20},
        },
        "runs": {
            "reach": {
                "environment": {"type": "poison_env:PoisonedMetaWorld", "task": "reach-v3"},
                "policy": {"type": "metaworld_expert_remote"},
                # as a model slower than a few ms is served: on the inference thread, batched
                "server": {"local_command": ["{python}", "-m", "arena", "serve", "metaworld-expert", "--host", "{host}",
                                            "--port", "{port}", "--inline-below-ms", "0", "--max-wait-ms", "50"]},
            }
        },
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-m", "arena", "run", str(path), "--output-dir", str(out), "--allow-import", "poison_env"],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    assert result.returncode == 3, result.stdout[-3000:] + result.stderr[-3000:]  # one error episode
    run_result = json.loads((out / "reach" / "run_result.json").read_text())
    assert run_result["state"] == "completed", run_result.get("error")
    records = [json.loads(line) for line in (out / "reach" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 8
    errors = [r for r in records if r["outcome"] == "error"]
    assert [r["seed"] for r in errors] == [103], [(r["seed"], r["error"]) for r in errors]
    assert "finite" in errors[0]["error"]
