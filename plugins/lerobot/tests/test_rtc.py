"""RTC-ready requests reach a LeRobot policy that accepts them (``arena serve lerobot``'s model,
in the ``lerobot`` venv): the delay as given, the previous chunk's not-yet-executed rows in the
policy's normalized space kept server-side per env; policies that take neither ignore them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from arena.testing.venvs import benchmark_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def test_rtc_fields_reach_a_policy_that_accepts_them(tmp_path):
    python = benchmark_python("lerobot")
    # this checkout's sources first: the venv may hold arena from another checkout
    path = os.pathsep.join([str(ROOT / "core"), str(ROOT / "plugins" / "lerobot" / "src"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([str(python), str(HERE / "rtc_reference.py"), str(tmp_path / "act")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    declares = out["declares"]
    assert declares["ACTPolicy"] is False
    # LeRobot's flow policies take the RTC arguments (where the venv can import them: they need transformers)
    assert all(v is True or str(v).startswith("not importable") for k, v in declares.items() if k != "ACTPolicy")
    assert out["plain_metadata_rtc"] == {"accepts": False, "enabled": False} and out["plain_ignores_fields"]
    assert out["rtc_metadata"] == {"accepts": True, "enabled": True}
    first0, first1, second0, third0, new1 = out["calls"]
    assert [c["delay"] for c in out["calls"]] == [0, 0, 2, 3, 1] and all(c["batch"] == 1 for c in out["calls"])
    assert first0["leftover"] is None and first1["leftover"] is None and new1["leftover"] is None  # new episodes
    # the rows s = 4 .. of the env's previous (normalized) chunk, per env
    assert np.allclose(second0["leftover"][0], first0["chunk"][4:])
    assert np.allclose(third0["leftover"][0], second0["chunk"][4:])
