"""The benchmark venvs `make test` builds in a checkout's ``.venvs/`` are the ones ``arena`` uses
when it runs from that checkout's ``.venv``, with no ``$ARENA_VENVS`` and no second copy.

The checkout is faked in a temporary directory: an arena-core ``pyproject.toml``, a ``.venv``
made by ``python -m venv`` that sees this interpreter's packages (one ``.pth`` line) and has
the ``arena`` script pip writes, and a ``.venvs/aloha`` that is the suite's real ALOHA venv
(a symbolic link: nothing is installed, nothing written outside the temporary directory).
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from arena.testing.venvs import benchmark_python

REPO = Path(__file__).resolve().parents[1]
ALOHA_QUICK = REPO / "examples" / "aloha_quick.yaml"


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "arena-core"\n')
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True, timeout=120)
    python = root / ".venv" / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()
    here = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "arena-checkout-test.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in here))
    arena = root / ".venv" / "bin" / "arena"
    arena.write_text(f"#!{python}\nimport sys\nfrom arena.cli import main\nsys.exit(main())\n")
    arena.chmod(0o755)
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ARENA_VENVS"}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # the default location, were it used: empty
    return env


def _arena(root: Path, tmp_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(root / ".venv" / "bin" / "arena"), *args], capture_output=True, text=True, cwd=tmp_path,
        env=_env(tmp_path), timeout=timeout,
    )


def test_doctor_and_validate_find_the_checkouts_venvs_without_arena_venvs(tmp_path):
    real = benchmark_python("aloha").parent.parent
    root = _checkout(tmp_path)
    done = _arena(root, tmp_path, "validate", str(ALOHA_QUICK))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stderr.split())
    assert "arena venv setup aloha" in text and str(root / ".venvs" / "aloha") in text  # not there yet: where it looked

    (root / ".venvs").mkdir()
    (root / ".venvs" / "aloha").symlink_to(real, target_is_directory=True)
    done = _arena(root, tmp_path, "validate", str(ALOHA_QUICK))
    assert done.returncode == 0 and "does not exist" not in done.stderr, done.stderr

    doctor = _arena(root, tmp_path, "doctor", "--json", "--no-render")
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    where = checks["benchmark venvs"]
    assert where["status"] == "info" and str(root / ".venvs") in where["detail"]
    assert f"the checkout's .venvs: arena runs from {root / '.venv'}" in where["detail"]
    aloha = checks["venv aloha"]
    assert aloha["status"] == "ok", aloha
    assert str(root / ".venvs" / "aloha" / "bin" / "python") in aloha["detail"]
    assert not (tmp_path / "xdg").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_readme_aloha_run_uses_the_checkouts_venv(tmp_path):
    real = benchmark_python("aloha").parent.parent
    root = _checkout(tmp_path)
    (root / ".venvs").mkdir()
    (root / ".venvs" / "aloha").symlink_to(real, target_is_directory=True)
    out = tmp_path / "out"
    done = _arena(root, tmp_path, "run", str(ALOHA_QUICK), "--output-dir", str(out), timeout=840)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "does not exist" not in done.stderr
    for run in ("transfer_cube_expert", "transfer_cube_zero"):
        log = "".join(p.read_text(errors="replace") for p in (out / run).rglob("*.log"))
        assert f"under {root / '.venvs' / 'aloha' / 'bin' / 'python'}" in log + done.stderr, run
        lines = (out / run / "episodes.jsonl").read_text().splitlines()
        assert len(lines) == 10 and all(json.loads(line)["outcome"] != "error" for line in lines)
    assert not (tmp_path / "xdg").exists()
