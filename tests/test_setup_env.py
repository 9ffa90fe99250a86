"""scripts/setup-env.sh, the set-up behind `make quickstart` and `make test`: alternating the two
commands installs the workspace once per change, not on every switch."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _executable(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _checkout(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A checkout with the real script, a workspace of two packages and a .venv whose python
    only logs what it is asked to install."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for script in ("setup-env.sh", "setup-system.sh"):
        shutil.copy2(REPO / "scripts" / script, root / "scripts" / script)
    # The system packages' scripts: "installed" once they ran (as .ci/setup.d's are, idempotently).
    (root / ".ci" / "setup.d").mkdir(parents=True)
    for name in ("slurm", "vulkan"):
        marker = tmp_path / f"{name}.installed"
        (root / ".ci" / "setup.d" / f"{name}.sh").write_text(
            f'if [ -e "{marker}" ]; then exit 0; fi\n'
            'if [ "${1:-}" = "--check" ]; then exit 1; fi\n'
            f'echo "$(id -u)" > "{marker}"\n'
        )
    (root / "pyproject.toml").write_text('[project]\nname = "arena-core"\n')
    (root / "plugins" / "demo").mkdir(parents=True)
    (root / "plugins" / "demo" / "pyproject.toml").write_text('[project]\nname = "arena-plugin-demo"\n')
    log = tmp_path / "pip.log"
    (root / ".venv" / "bin").mkdir(parents=True)
    _executable(root / ".venv" / "bin" / "python", f'printf "%s\\n" "$*" >> "{log}"')
    _executable(root / ".venv" / "bin" / "arena", f'printf "%s\\n" "$*" >> "{tmp_path / "arena.log"}"')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir / "ldconfig", 'echo "libOSMesa.so.8 (libc6,x86-64) => /usr/lib/libOSMesa.so.8"')
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return root, log, env


def _setup(root: Path, env: dict[str, str], *extras: str) -> None:
    subprocess.run(["bash", str(root / "scripts" / "setup-env.sh"), *extras], check=True, env=env,
                   capture_output=True, text=True, timeout=120)


def _installs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_quickstart_and_test_alternating_install_once(tmp_path):
    root, log, env = _checkout(tmp_path)
    _setup(root, env)  # make quickstart
    assert _installs(log) == ["-m pip install -q -e .[sim] -e plugins/demo"]
    _setup(root, env, "test")  # make test: the test extras are new
    assert _installs(log)[1:] == ["-m pip install -q -e .[sim,test] -e plugins/demo"]
    for extras in ((), ("test",), (), ("test",)):  # alternating: the environment serves both
        _setup(root, env, *extras)
    assert len(_installs(log)) == 2


def test_a_changed_package_is_installed_again_with_every_extra_so_far(tmp_path):
    root, log, env = _checkout(tmp_path)
    _setup(root, env, "test")
    (root / "plugins" / "demo" / "pyproject.toml").write_text('[project]\nname = "arena-plugin-demo"\nversion = "2"\n')
    _setup(root, env)
    assert _installs(log)[-1] == "-m pip install -q -e .[sim,test] -e plugins/demo"
    _setup(root, env, "test")
    assert len(_installs(log)) == 2


def test_the_test_set_up_creates_every_declared_benchmark_venv_with_the_one_command(tmp_path):
    root, log, env = _checkout(tmp_path)
    arena_log = tmp_path / "arena.log"
    _setup(root, env)  # make quickstart: no benchmark venvs
    assert not arena_log.exists()
    _setup(root, env, "test")
    assert arena_log.read_text().splitlines() == ["venv setup --if-possible --quiet --jobs 3"]


def _as_user(env: dict[str, str], uid: int) -> dict[str, str]:
    """``env`` whose ``id -u`` says ``uid`` (root or not, whoever runs the test)."""
    bin_dir = Path(env["PATH"].split(os.pathsep)[0])
    _executable(bin_dir / "id", f'if [ "$1" = "-u" ]; then echo {uid}; else exec /usr/bin/id "$@"; fi')
    return env


def test_the_test_set_up_installs_the_system_packages_as_root(tmp_path):
    root, _, env = _checkout(tmp_path)
    env = _as_user(env, 0)
    _setup(root, env)  # make quickstart needs none of them
    assert not (tmp_path / "slurm.installed").exists()
    done = subprocess.run(["bash", str(root / "scripts" / "setup-env.sh"), "test"], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert (tmp_path / "slurm.installed").read_text().strip() == "0"
    assert (tmp_path / "vulkan.installed").exists()
    assert "setup-system.sh" not in done.stderr


def test_the_test_set_up_names_the_one_command_when_not_root(tmp_path):
    root, _, env = _checkout(tmp_path)
    env = _as_user(env, 1000)
    done = subprocess.run(["bash", str(root / "scripts" / "setup-env.sh"), "test"], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert not (tmp_path / "slurm.installed").exists()
    assert "not installed: slurm vulkan; run once: sudo scripts/setup-system.sh" in done.stderr
    (tmp_path / "slurm.installed").write_text("0")
    (tmp_path / "vulkan.installed").write_text("0")
    done = subprocess.run(["bash", str(root / "scripts" / "setup-env.sh"), "test"], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    assert "setup-system.sh" not in done.stderr
