"""A chunk of the wrong length is a protocol violation, not an episode under the wrong label."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import ValidationError

from arena.errors import ConfigError
from arena.rollout.rollout import rollout
from arena.rollout.workitems import WorkItem
from arena.testing import OpenPIDouble, RecordingModel
from arena.testing.droid import DroidFakeEnv
from arena_openpi.adapters import OpenPIAdapter
from arena_openpi.policy import Pi0RemoteConfig, Pi0RemotePolicy
from arena_openpi.testing import openpi_server_double, reply_factory


def run_episodes(policy: Pi0RemotePolicy, num_envs: int = 2, episodes: int = 2, steps: int = 12) -> list[Any]:
    records: list[Any] = []
    limit = SimpleNamespace(max_episode_steps=steps, terminate_on_success=True)
    items = [WorkItem("r", i, i) for i in range(episodes)]
    try:
        rollout(DroidFakeEnv(num_envs), policy, items, limit, on_episode_end=records.append, max_consecutive_errors=None)
    finally:
        policy.close()
    return records


def client(port: int, **fields: Any) -> Pi0RemotePolicy:
    timeouts = {"connect_timeout_s": 10, "first_request_timeout_s": 10, "request_timeout_s": 10}
    return Pi0RemotePolicy(Pi0RemoteConfig(remote_port=port, **timeouts, **fields))


@pytest.mark.parametrize(("client_variant", "server_variant", "got", "want"), [("pi05", "pi0", 10, 15), ("pi0", "pi05", 15, 10)])
def test_a_server_of_the_other_variant_is_refused_naming_both_lengths(client_variant, server_variant, got, want):
    with openpi_server_double("droid", server_variant) as server:
        records = run_episodes(client(server.port, policy_variant=client_variant))
    assert records and all(r.outcome == "error" for r in records)
    assert all(f"'actions' has {got} rows; expected {want}" in r.error for r in records), records[0].error
    assert all("protocol violation" in r.error for r in records)


def test_the_matching_variant_runs_its_episodes():
    with openpi_server_double("droid", "pi0") as server:
        records = run_episodes(client(server.port, policy_variant="pi0"), steps=3)
    assert [r.outcome for r in records] == ["timeout", "timeout"]


def test_chunk_length_overrides_the_table_for_a_fine_tune():
    def fine_tune(request: dict[str, Any]) -> dict[str, Any]:  # a pi05 DROID fine-tune with horizon 16
        return {"actions": np.zeros((16, 8))}

    with OpenPIDouble(RecordingModel(fine_tune)) as server:
        refused = run_episodes(client(server.port), episodes=1, num_envs=1)
        accepted = run_episodes(client(server.port, chunk_length=16, open_loop_horizon=8), episodes=1, num_envs=1, steps=3)
    assert refused[0].outcome == "error" and "16 rows; expected 15" in refused[0].error
    assert accepted[0].outcome == "timeout"


class _CustomAdapter(OpenPIAdapter):
    """An embodiment without a chunk-length table (a plugin author's robot)."""

    action_dim: ClassVar[int] = 8
    open_loop_horizon_by_variant: ClassVar[dict[str, int]] = {"pi05": 2}

    def extract(self, observation: dict[str, Any], env_id: int) -> Any:
        return observation["policy"]["joint_pos"][env_id]

    def pack_request(self, extracted: Any, instruction: str | None) -> dict[str, Any]:
        return {"state": np.asarray(extracted, np.float64), "prompt": instruction or ""}


def test_an_unknown_embodiment_takes_the_first_length_and_refuses_a_change():
    calls = {"n": 0}

    def drifting(request: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        return {"actions": np.zeros((4 if calls["n"] == 1 else 6, 8))}

    with OpenPIDouble(RecordingModel(drifting)) as server:
        config = Pi0RemoteConfig(remote_port=server.port, embodiment="custom", connect_timeout_s=10)
        policy = Pi0RemotePolicy(config, adapter=_CustomAdapter())
        records = run_episodes(policy, num_envs=1, episodes=1, steps=6)
    assert records[0].outcome == "error"
    assert "'actions' has 6 rows; expected 4 (the server's first reply)" in records[0].error


def test_a_horizon_longer_than_the_chunk_is_a_config_error():
    with pytest.raises(ValidationError, match="open_loop_horizon 12 exceeds chunk_length 10"):
        Pi0RemoteConfig(policy_variant="pi0", open_loop_horizon=12)
    config = Pi0RemoteConfig.model_construct(**{**Pi0RemoteConfig().model_dump(), "open_loop_horizon": 12, "policy_variant": "pi0"})
    with pytest.raises(ConfigError, match="open_loop_horizon 12 exceeds the 10 rows"):  # the policy checks it too
        Pi0RemotePolicy(config)


@pytest.mark.parametrize(
    ("policy", "needle"),
    [
        ({"policy_variant": "pi05", "chunk_length": 10},
         "open_loop_horizon 15 (the droid adapter's for pi05) exceeds chunk_length 10"),
        ({"policy_variant": "pi0", "embodiment": "droid", "open_loop_horizon": 11}, "open_loop_horizon 11 exceeds chunk_length 10"),
    ],
)
def test_validate_refuses_a_horizon_longer_than_the_chunk(tmp_path, policy, needle):
    """`arena validate` says it (exit 2 naming both keys), not `arena run` building the policy."""
    import subprocess
    import sys

    import yaml

    path = tmp_path / "exp.yaml"
    runs = {"droid": {"environment": {"type": "metaworld", "task": "reach-v3"}, "policy": {"type": "pi0_remote", **policy}}}
    path.write_text(yaml.safe_dump({"runs": runs}))
    result = subprocess.run([sys.executable, "-m", "arena", "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    flat = " ".join(result.stderr.split())
    assert needle in flat and str(path) in flat and "droid" in flat


def test_the_table_matches_the_double_of_every_modelled_checkpoint():
    from arena.plugins import get_registry
    from arena_openpi.testing import CHUNK_SHAPES

    for (embodiment, variant), (rows, _) in CHUNK_SHAPES.items():
        adapter = get_registry().adapter("openpi", embodiment)
        assert adapter.chunk_length_by_variant[variant] == rows, (embodiment, variant)
    assert reply_factory("libero", "pi0")({})["actions"].shape == (50, 7)
