"""Set-up's pip stays quiet: setuptools' "Editable installation" banner (13 lines per
flat-layout package, printed despite ``pip -q``) is filtered by scripts/setup-env.sh."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FILTER = "ignore:Editable installation"


def _executable(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_setup_runs_pip_with_the_editable_banner_filtered(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "setup-env.sh", root / "scripts" / "setup-env.sh")
    (root / "pyproject.toml").write_text('[project]\nname = "arena-core"\n')
    log = tmp_path / "pip.log"
    (root / ".venv" / "bin").mkdir(parents=True)
    # This .venv's python only logs what it is asked and the warning filters it gets.
    _executable(root / ".venv" / "bin" / "python", f'printf "%s | %s\\n" "$*" "$PYTHONWARNINGS" >> "{log}"')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "ldconfig", 'echo "libOSMesa.so.8 (libc6,x86-64) => /usr/lib/libOSMesa.so.8"')
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONWARNINGS": "default::ResourceWarning"}
    subprocess.run(["bash", str(root / "scripts" / "setup-env.sh")], check=True, env=env, capture_output=True, timeout=120)
    (line,) = log.read_text().splitlines()
    assert line == f"-m pip install -q -e .[sim] | {FILTER},default::ResourceWarning"  # the user's filters kept


@pytest.mark.slow
def test_the_filter_silences_setuptools_banner_of_a_flat_layout_package(tmp_path):
    """Against the real setuptools: the banner is printed without the filter, not with it.

    The workspace's packages all have the ``src/`` layout now, for which setuptools prints no
    banner; a user's own plugin may still be flat, as this one is."""
    package = tmp_path / "flat_plugin"
    (package / "flat_plugin").mkdir(parents=True)
    (package / "flat_plugin" / "__init__.py").write_text("")
    (package / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "flat-plugin"\nversion = "0.1.0"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["flat_plugin*"]\n'
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)

    def install(**extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", "-e", str(package)],
            capture_output=True, text=True, timeout=300, env={**os.environ, **extra},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    assert "Editable installation" in install()
    assert "Editable installation" not in install(PYTHONWARNINGS=FILTER)
