"""The rendered job script against a real impostor: its node supervisor's port check, run on this machine.

``srun`` and ``scontrol`` are stand-ins that run each step here (every step is on "the
node"), so the job's logic (``arena node``: choose a port, start the server step, probe it,
check that the listening socket belongs to the server step, retry on another port) runs for
real, with real server processes and a real impostor holding the port.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arena.config import load_experiment_dict, write_snapshot
from arena.launch.planning import plan_servers
from arena.launch.queueing import load_runs
from arena.rollout.workitems import write_manifest
from arena.testing import OpenPIDouble, RecordingModel
from arena_slurm.render import node_spec_file, render_node_spec, render_run_script

pytestmark = pytest.mark.slow

SLOW_SERVER = (
    "import os, sys, time; time.sleep(5); "
    "os.execv(sys.executable, [sys.executable, '-m', 'arena', *sys.argv[1:]])"
)


def fake_slurm_tools(bin_dir: Path) -> None:
    """``srun [options] CMD...`` runs CMD here; ``scontrol show hostnames`` names this host."""
    bin_dir.mkdir()
    tools = {
        "srun": '#!/bin/bash\nwhile [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n',
        "scontrol": "#!/bin/bash\nhostname\n",
    }
    for name, text in tools.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _expert_actions(request: dict[str, Any]) -> dict[str, Any]:
    return {"actions": np.zeros((1, 4), np.float32)}


def test_the_job_script_never_runs_against_an_impostor_on_its_port(tmp_path):
    command = ["{python}", "-c", SLOW_SERVER, "serve", "metaworld-expert", "--host", "{host}", "--port", "{port}"]
    exp = load_experiment_dict(
        {
            "launch": {"backend": "slurm", "slurm": {"arena": f"{sys.executable} -m arena", "python": sys.executable}},
            "shared": {"environment_builder": {"num_envs": 1, "seed": 0}, "rollout_limit": {"num_episodes": 1}},
            "runs": {
                "expert": {
                    "environment": {"type": "metaworld", "task": "reach-v3"},
                    "policy": {"type": "metaworld_expert_remote"},
                    "server": {"local_command": command, "startup_timeout_s": 120},
                }
            },
        },
        source="exp.yaml",
    )
    out = tmp_path / "out"
    out.mkdir()
    write_snapshot(exp, out / "experiment.yaml")
    write_manifest(exp, out)
    load_runs(out, exp, ["expert"])  # what submit does before any job starts (launch.slurm.work: queue)
    (out / "slurm").mkdir()
    plan, options = plan_servers(exp)["expert"], exp.launch.options("slurm")
    (out / "slurm" / node_spec_file("expert")).write_text(render_node_spec(exp, "expert", plan, options, out))
    script = tmp_path / "expert.sbatch"
    script.write_text(render_run_script(exp, "expert", plan, options, out))
    fake_slurm_tools(tmp_path / "bin")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node0"}
    job = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    impostor = None
    try:
        deadline = time.monotonic() + 120
        status = out / "expert" / "status.json"
        while impostor is None and time.monotonic() < deadline and job.poll() is None:
            try:
                server = json.loads(status.read_text()).get("server")
            except (OSError, ValueError):
                server = None
            if server:  # the script chose its port and started the (slow) server step
                impostor = OpenPIDouble(RecordingModel(_expert_actions), port=server["port"]).__enter__()
            time.sleep(0.05)
        output, _ = job.communicate(timeout=300)
    finally:
        if job.poll() is None:
            job.kill()
        if impostor is not None:
            impostor.__exit__(None, None, None)
    assert impostor is not None, output
    assert impostor.model.requests == [], "the runner sent inference requests to the impostor"
    assert job.returncode == 0, output
    assert json.loads((out / "expert" / "status.json").read_text())["state"] == "completed"
    log = (out / "expert" / "server.log").read_text()
    assert f"answered by pid {os.getpid()}" in log and "starting it again on another port" in log, log
