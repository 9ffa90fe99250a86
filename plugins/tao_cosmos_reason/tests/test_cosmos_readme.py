"""The README's walk-through, run as written: every ```bash block in order, in one shell, from the
repository root, with ``$WS`` in a temporary folder. Every line its ```text blocks show (but "...")
must appear in what the commands printed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).resolve().parents[1]
REPO = PLUGIN.parents[1]
README = PLUGIN / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
README_WS = "/tmp/cosmos-demo"


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text(encoding="utf-8")) if lang == kind]


def test_readme_has_a_walk_through_of_every_verb_it_promises():
    commands = "\n".join(blocks("bash"))
    for verb in ("resolve", "plan", "materialize", "preflight", "render-docker", "render-slurm", "validate-metadata",
                 "finalize-metadata", "extract-metrics", "evaluate"):
        assert f"arena cosmos-reason {verb} " in commands, verb


@pytest.mark.slow
@pytest.mark.timeout(1800)  # ~25 `arena` start-ups: half a minute alone, many minutes on a loaded CI machine
def test_readme_walk_through_runs_as_written(tmp_path, fake_bin):
    fake_bin("docker", 'echo "Docker version 27.0 (stand-in)"')  # preflight only asks whether it is installed
    fake_bin("ssh", 'echo "ssh must not be called by a local-frame plan" >&2; exit 255')
    workspace = tmp_path / "cosmos-demo"
    env = dict(os.environ, WS=str(workspace))
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env["PATH"]])
    script = "set -euo pipefail\n" + "\n".join(blocks("bash"))
    done = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    printed = {line.strip() for line in done.stdout.splitlines()}
    for body in blocks("text"):
        for line in body.splitlines():
            line = line.strip().replace(README_WS, str(workspace))
            if line and line != "...":
                assert line in printed, f"README shows {line!r}, the commands did not print it"
    assert (workspace / "doors-train-2.sbatch").is_file() and (workspace / "doors-eval-1.sh").is_file()
    assert not (REPO / "cosmos-demo").exists()
