"""`arena doctor`: every check says what it found, and a failing one says how to fix it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from arena import doctor
from arena.cli import app


def test_doctor_reports_versions_plugins_tools_and_ports_as_json():
    result = CliRunner().invoke(app, ["doctor", "--no-render", "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert checks["python"]["status"] == "ok"
    assert checks["arena-core"]["status"] == "ok" and checks["package av"]["status"] == "ok"
    assert checks["plugins"]["status"] in ("ok", "fail")
    assert checks["video encoding"]["status"] == "ok"
    assert {"sbatch on PATH", "osmo on PATH", "free ports", "default server ports"} <= set(checks)
    for check in checks.values():
        if check["status"] in ("fail", "warn"):
            assert check["fix"], check
    assert result.exit_code == (1 if any(c["status"] == "fail" for c in checks.values()) else 0)


def test_missing_tools_and_packages_come_with_a_fix(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda tool: None)
    sbatch = next(c for c in doctor.check_tools() if c.name == "sbatch on PATH")
    assert sbatch.status == "info" and "slurm" in sbatch.detail and sbatch.fix
    monkeypatch.setattr(doctor, "PACKAGES", (("surely-not-installed-pkg", "testing", None),))
    missing = doctor.check_packages()[-1]
    assert missing.status == "fail" and missing.fix == "pip install 'surely-not-installed-pkg'"


def test_a_missing_simulator_extra_is_information_naming_the_extra(monkeypatch):
    monkeypatch.setattr(doctor, "PACKAGES", (("surely-not-installed-sim", "a simulator", "sim"),))
    missing = doctor.check_packages()[-1]
    assert missing.status == "info" and missing.fix == "pip install 'arena-core[sim]'"


def test_a_broken_plugin_fails_with_its_error_and_a_fix(monkeypatch):
    import arena.plugins

    real = arena.plugins.get_plugin_manager()
    fake = SimpleNamespace(
        describe=lambda: real.registry,
        infos=real.infos,
        broken=[SimpleNamespace(name="bad", distribution="arena-plugin-bad", error="ImportError: no module named torch")],
    )
    monkeypatch.setattr(arena.plugins, "get_plugin_manager", lambda: fake)
    bad = next(c for c in doctor.check_plugins() if c.name == "plugin bad")
    assert bad.status == "fail" and "no module named torch" in bad.detail and "arena-plugin-bad" in bad.fix


def test_a_busy_default_port_is_a_warning_with_a_fix():
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", doctor.DEFAULT_SERVER_PORTS[0]))
        except OSError:
            pass  # already busy: the check must warn all the same
        sock.listen()
        ports = next(c for c in doctor.check_ports() if c.name == "default server ports")
    assert ports.status == "warn" and str(doctor.DEFAULT_SERVER_PORTS[0]) in ports.detail and ports.fix


@pytest.mark.slow
def test_headless_rendering_renders_one_frame():
    check = doctor.check_rendering()
    assert check.status == "ok", check
    assert "chosen by arena" in check.detail or "set by you" in check.detail  # which backend, and why


def test_doctor_counts_and_hints_read_as_english(monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda tool: None)
    fixes = {c.name: c.fix for c in doctor.check_tools()}
    assert fixes["sbatch on PATH"].startswith("run on a Slurm login node")
    assert "a osmo" not in fixes["osmo on PATH"] and "osmo login" in fixes["osmo on PATH"]
    assert doctor._count(1, "launch backend") == "1 launch backend"
    assert doctor._count(2, "policy", "policies") == "2 policies"
    detail = next(c for c in doctor.check_plugins() if c.name == "plugins").detail
    assert "1 launch backends" not in detail and "1 policies" not in detail and "1 environments" not in detail


def _only_environment_in_venv(monkeypatch, tmp_path, venv: str = "bench"):
    import arena.plugins

    from arena.venvs import VenvSpec

    class BenchEnvironment:
        default_venv = VenvSpec(name=venv)

    fake = SimpleNamespace(registry=SimpleNamespace(environments={"bench_env": BenchEnvironment, "metaworld": object}))
    monkeypatch.setattr(arena.plugins, "get_plugin_manager", lambda: fake)
    monkeypatch.setenv("ARENA_VENVS", str(tmp_path / "venvs"))
    return tmp_path / "venvs" / venv


def _venv_checks():
    """check_venvs() after its first check, where it looked (asserted on its own below)."""
    where, *checks = doctor.check_venvs()
    assert where.name == "benchmark venvs" and where.status == "info"
    return checks


def _interpreter(directory, script: str | None = None):
    import sys

    (directory / "bin").mkdir(parents=True)
    python = directory / "bin" / "python"
    if script is None:  # stands in for a venv of this interpreter: the same arena-core
        script = f'#!/bin/sh\nexec {sys.executable} "$@"\n'
    python.write_text(script)
    python.chmod(0o755)
    return python


def test_a_benchmark_venv_never_created_is_information_with_its_setup_command(monkeypatch, tmp_path):
    where = _only_environment_in_venv(monkeypatch, tmp_path)
    [check] = _venv_checks()
    assert (check.name, check.status, check.fix) == ("venv bench", "info", "arena venv setup bench")
    assert str(where) in check.detail and "bench_env environment" in check.detail


def test_a_benchmark_venv_whose_setup_did_not_finish_is_a_warning(monkeypatch, tmp_path):
    where = _only_environment_in_venv(monkeypatch, tmp_path)
    _interpreter(where)
    [check] = _venv_checks()
    assert check.status == "warn" and "incomplete" in check.detail and check.fix == "arena venv setup bench"


def test_a_complete_benchmark_venv_is_ok_with_its_python_and_arena_core(monkeypatch, tmp_path):
    import sys
    from importlib import metadata

    where = _only_environment_in_venv(monkeypatch, tmp_path)
    python = _interpreter(where)
    (where / ".arena-stamp").write_text("{}")
    [check] = _venv_checks()
    assert check.status == "ok", check
    assert check.detail == f"Python {sys.version.split()[0]} at {python}, arena-core {metadata.version('arena-core')}"


def test_a_benchmark_venv_with_another_arena_core_is_a_warning(monkeypatch, tmp_path):
    where = _only_environment_in_venv(monkeypatch, tmp_path)
    _interpreter(where, "#!/bin/sh\necho 3.11.0 0.0.1\n")
    (where / ".arena-stamp").write_text("{}")
    [check] = _venv_checks()
    assert check.status == "warn" and "arena-core 0.0.1, this interpreter has" in check.detail
    assert check.fix == "arena venv setup bench"


def test_doctor_says_whether_uv_is_on_path_for_uv_run_servers(monkeypatch, tmp_path):
    from arena import doctor

    monkeypatch.setenv("PATH", str(tmp_path))
    uv = next(c for c in doctor.check_tools() if c.name == "uv on PATH")
    assert uv.status == "info" and "uv run" in uv.detail and "arena validate" in uv.detail
    (tmp_path / "uv").write_text("#!/bin/sh\n")
    (tmp_path / "uv").chmod(0o755)
    uv = next(c for c in doctor.check_tools() if c.name == "uv on PATH")
    assert uv.status == "ok" and uv.detail == str(tmp_path / "uv")
