"""arena.outputs.layout: the one place that names an output directory's files and paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from arena.errors import LaunchError
from arena.outputs import layout
from arena.outputs.records import StatusWriter, read_run_statuses

ROOT = Path(__file__).resolve().parents[2]


def test_work_dir_is_the_run_or_its_shard(tmp_path):
    assert layout.work_dir(tmp_path, "reach") == tmp_path / "reach"
    assert layout.work_dir(tmp_path, "reach", 3) == tmp_path / "reach" / "shards" / "3"
    assert layout.work_dir(tmp_path, "reach", 0) == tmp_path / "reach" / "shards" / "0"  # shard 0 is a shard


def test_shard_dirs_come_in_shard_order(tmp_path):
    run = tmp_path / "reach"
    assert layout.shard_dirs(run) == [] and layout.work_dirs(run) == [run]
    for name in ("10", "2", "0", "notes"):
        (run / "shards" / name).mkdir(parents=True)
    (run / "shards" / "stray.txt").write_text("not a shard")
    assert [d.name for d in layout.shard_dirs(run)] == ["0", "2", "10", "notes"]  # 10 after 2, not before
    assert layout.work_dirs(run)[0] == run


def _snapshot(out: Path, text: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / layout.EXPERIMENT_FILE).write_text(text)


def test_run_names_are_the_planned_runs_then_any_other_run_directory(tmp_path):
    _snapshot(tmp_path, "name: e\nruns:\n  b: {}\n  a: {}\n")
    (tmp_path / "z_extra").mkdir()
    (tmp_path / "z_extra" / layout.STATUS_FILE).write_text("{}")
    (tmp_path / "videos_elsewhere").mkdir()  # no run file: not a run
    assert layout.run_names(tmp_path) == ["b", "a", "z_extra"]  # the snapshot's order, then found ones
    manifest = {"runs": {"m": {}}}
    assert layout.run_names(tmp_path, manifest) == ["m", "z_extra"]  # a manifest wins over the snapshot
    assert layout.run_names(tmp_path, {}) == ["z_extra"]
    assert layout.run_names(tmp_path / "missing") == []


def test_the_snapshot_is_read_with_the_hardened_reader(tmp_path):
    _snapshot(tmp_path, "name: e\nruns:\n  a: {}\n  a: {}\n")  # a run given twice: yaml.safe_load keeps the last
    assert layout.read_snapshot(tmp_path) is None
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh")
    )
    _snapshot(tmp_path, bomb + "runs: {r: *h}\n")
    assert layout.read_snapshot(tmp_path) is None  # refused before it expands
    assert layout.run_names(tmp_path) == []
    _snapshot(tmp_path, "- a list\n")
    assert layout.read_snapshot(tmp_path) is None
    assert layout.read_snapshot(tmp_path / "missing") is None


def test_read_run_statuses(tmp_path):
    with pytest.raises(LaunchError, match="no experiment.yaml"):
        read_run_statuses(tmp_path)
    _snapshot(tmp_path, "name: e\nruns:\n  a: {}\n  b: {}\n  c: {}\n")
    StatusWriter(layout.work_dir(tmp_path, "a") / layout.STATUS_FILE).write(state="running", run="a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / layout.STATUS_FILE).write_text("{torn")
    statuses = read_run_statuses(tmp_path)
    assert statuses["a"]["state"] == "running"
    assert statuses["b"] == {"state": "pending"} and statuses["c"] == {"state": "pending"}


def test_no_literal_file_name_or_final_states_outside_the_outputs_package():
    """Core and the backends name the output files and the final states only through arena.outputs."""
    literals = ('"status.json"', '"episodes.jsonl"', '"run_result.json"', '"manifest.json"', '"experiment.yaml"',
                '("completed", "failed", "cancelled")', '"pending", "starting_server", "running"')
    offenders = []
    for base in (ROOT / "core" / "arena", *(ROOT / "backends").glob("*/src/arena_*")):
        for path in base.rglob("*.py"):
            if "outputs" in path.relative_to(ROOT / "core" / "arena" if base.name == "arena" else base).parts[:1]:
                continue
            text = path.read_text(encoding="utf-8")
            # a name quoted in a docstring (``"status.json"``) is prose, not a path
            offenders += [f"{path.relative_to(ROOT)}: {lit}" for lit in literals if re.search(r"(?<!`)" + re.escape(lit), text)]
        # job-script templates name none either: the node supervisor (arena node) writes the states
        for path in base.rglob("*.j2"):
            offenders += [f"{path.relative_to(ROOT)}: {name}" for name in ("status.json", "run_result.json")
                          if name in path.read_text(encoding="utf-8")]
    assert offenders == []

