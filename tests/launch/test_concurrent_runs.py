"""Two `arena run` started at the same moment never share an output directory.

The example of issue 17: 1 try in 36, two runs took the same ``outputs/<exp>/<timestamp>``;
both exited 0 and the directory held 6 records for 3 episodes. Here the race is forced, not
left to chance: both processes stop at the entry of ``run_experiment`` behind a file barrier
and are released together, their clocks are frozen to one second (the same default name),
and the backend check between "is the directory free?" and "use it" is slowed to 0.5 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from arena.outputs.records import read_records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "rollout"

#: Runs `arena ARGS…` with run_experiment gated by a barrier, a frozen clock and a slow check.
GATED_ARENA = r"""
import os, sys, time, datetime as real_datetime
from pathlib import Path

gate = Path(os.environ["ARENA_TEST_GATE"])
import arena.launch.submit as submit
from arena.launch.local import LocalBackend

class FrozenClock(real_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2026, 1, 2, 3, 4, 5)

submit.datetime = FrozenClock

checked = LocalBackend.check
def slow_check(self, experiment, servers):  # widen the window between "free?" and "mine"
    time.sleep(0.5)
    return checked(self, experiment, servers)
LocalBackend.check = slow_check

run_experiment = submit.run_experiment
def gated(*args, **kwargs):
    (gate / f"ready-{os.getpid()}").touch()
    while not (gate / "go").exists():
        time.sleep(0.001)
    return run_experiment(*args, **kwargs)
submit.run_experiment = gated

from arena.cli import main
sys.argv = ["arena", *sys.argv[1:]]
main()
"""


def _start_two(tmp_path: Path, *args: str) -> list[subprocess.Popen]:
    gate = tmp_path / "gate"
    gate.mkdir()
    exp = tmp_path / "race.yaml"
    exp.write_text(yaml.safe_dump({"runs": {"count": {
        "environment": {"type": "rollout_fakes:CounterEnv"},
        "policy": {"type": "rollout_fakes:CoinFlipPolicy"},
        "environment_builder": {"num_envs": 1, "seed": 0},
        "rollout_limit": {"num_episodes": 3},
    }}}))
    env = {**os.environ, "ARENA_TEST_GATE": str(gate), "ARENA_ALLOW_IMPORTS": "rollout_fakes",
           "PYTHONPATH": os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])}
    procs = [
        subprocess.Popen([sys.executable, "-c", GATED_ARENA, "run", str(exp), *args], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    deadline = time.monotonic() + 120
    while len(list(gate.glob("ready-*"))) < 2:
        assert time.monotonic() < deadline, [p.communicate() for p in procs]
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    (gate / "go").touch()  # both released together
    return procs


def _finish(procs: list[subprocess.Popen]) -> list[tuple[int, str, str]]:
    return [(p.wait(timeout=300), *p.communicate()) for p in procs]


def _records(out: Path) -> list:
    records, issues = read_records(out / "count" / "episodes.jsonl")
    assert issues == []
    return records


def test_two_runs_in_the_same_second_get_their_own_default_directories(tmp_path):
    results = _finish(_start_two(tmp_path))
    assert [code for code, _, _ in results] == [0, 0], results
    outs = sorted((tmp_path / "outputs" / "race").iterdir())
    assert [o.name for o in outs] == ["2026-01-02_03-04-05", "2026-01-02_03-04-05-2"]
    for out in outs:
        assert sorted(r.episode_index for r in _records(out)) == [0, 1, 2]


def test_two_runs_on_one_output_dir_at_once_only_one_proceeds(tmp_path):
    out = tmp_path / "shared"
    results = _finish(_start_two(tmp_path, "--output-dir", str(out)))
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert str(out) in refused and ("taken by another arena run" in refused or "not empty" in refused)
    assert sorted(r.episode_index for r in _records(out)) == [0, 1, 2]
