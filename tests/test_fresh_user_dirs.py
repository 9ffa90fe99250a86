"""The suite leaves the user's home alone: HOME, XDG_*, HF_HOME and the caches point at a new
empty folder for the whole session (``arena_fresh_user_dirs``), as on a fresh machine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from arena.testing import user_dirs

REPO = Path(__file__).resolve().parents[1]


def test_this_session_runs_in_a_fresh_home():
    root = Path(os.environ[user_dirs.MARKER])
    assert Path.home() == root / "home"
    for name in user_dirs.USER_DIRS:
        assert Path(os.environ[name]).is_relative_to(root), name
    assert Path(os.path.expanduser("~/.cache")).is_relative_to(root)


def test_a_session_writes_its_caches_into_its_own_folder_and_removes_it(tmp_path):
    """A pytest session with the ini option on: what a test writes under ~, XDG_CACHE_HOME or
    HF_HOME lands in the session's folder, which is gone afterwards; a subprocess sees it too."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\narena_fresh_user_dirs = true\n")
    (project / "test_writes.py").write_text(
        textwrap.dedent(
            """
            import os, subprocess, sys
            from pathlib import Path

            def test_write_everywhere():
                root = Path(os.environ["ARENA_FRESH_USER_DIRS"])
                print("ROOT=" + str(root))
                for var in ("HOME", "XDG_CACHE_HOME", "HF_HOME", "PIP_CACHE_DIR", "TORCH_HOME"):
                    Path(os.environ[var]).mkdir(parents=True, exist_ok=True)
                    (Path(os.environ[var]) / "written-by-test").write_text("x")
                child = subprocess.run([sys.executable, "-c", "import os; print(os.path.expanduser('~'))"],
                                       capture_output=True, text=True, check=True)
                assert child.stdout.strip() == str(root / "home")
            """
        )
    )
    real_home = tmp_path / "real-home"
    real_home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != user_dirs.MARKER and k not in user_dirs.USER_DIRS}
    env["HOME"] = str(real_home)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(project)],
        capture_output=True, text=True, cwd=project, env=env, timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    root = Path(next(line for line in result.stdout.splitlines() if "ROOT=" in line).split("ROOT=", 1)[1])
    assert not root.is_relative_to(real_home)
    assert not root.exists(), "the session's folder is removed at the end"
    assert list(real_home.iterdir()) == [], "nothing was written into the real home"


def test_the_ci_shell_gets_the_same_variables(tmp_path):
    """``.ci/run`` evals what ``python3 core/arena/testing/user_dirs.py ROOT`` prints."""
    script = REPO / "core" / "arena" / "testing" / "user_dirs.py"
    result = subprocess.run(
        ["bash", "-c", f'eval "$({sys.executable} {script} {tmp_path}/fresh)" && env'],
        capture_output=True, text=True, check=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != user_dirs.MARKER},
    )
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    for name, rel in user_dirs.USER_DIRS.items():
        assert seen[name] == str(tmp_path / "fresh" / rel)
    assert (tmp_path / "fresh" / "home").is_dir()
    assert user_dirs.MARKER not in seen, "a pytest session started from that shell still makes its own folder"


def test_pyenv_interpreters_stay_reachable(tmp_path):
    """pyenv finds its root through HOME when PYENV_ROOT is unset: the fresh environment names it."""
    home = tmp_path / "home"
    (home / ".pyenv").mkdir(parents=True)
    values = user_dirs.fresh_user_dirs(tmp_path / "fresh", {"HOME": str(home)})
    assert values["PYENV_ROOT"] == str(home / ".pyenv")
    assert values["HOME"] == str(tmp_path / "fresh" / "home")
    assert "PYENV_ROOT" not in user_dirs.fresh_user_dirs(tmp_path / "fresh2", {"HOME": str(tmp_path / "nohome")})
